#include "runtime/comm.h"

namespace ddpscope::runtime {

Status Communicator::allreduce(std::span<float> data, CommTag tag) {
  return allreduceAsync(data, std::move(tag))->wait();
}
Status Communicator::allreduce(std::span<int32_t> data, CommTag tag) {
  return allreduceAsync(data, std::move(tag))->wait();
}
Status Communicator::broadcast(std::span<std::byte> data, int root, CommTag tag) {
  return broadcastAsync(data, root, std::move(tag))->wait();
}
Status Communicator::allgather(std::span<const std::byte> send, std::span<std::byte> recv,
                               CommTag tag) {
  return allgatherAsync(send, recv, std::move(tag))->wait();
}
Status Communicator::barrier(CommTag tag) {
  return barrierAsync(std::move(tag))->wait();
}

}  // namespace ddpscope::runtime
