// ddpscope-run's NCCL backend (built only with CUDA, NCCL and the CUDA model): picks this
// rank's GPU (its node-local rank), creates the CudaContext, the NCCL communicator and the
// factory of the CUDA model. No CUDA header here: main() sees only these handles.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "runtime/comm.h"
#include "runtime/training.h"

namespace ddpscope::runtime {
class MpiSession;
}

namespace ddpscope::runtime::nccl {

class NcclBackend {
 public:
  virtual ~NcclBackend() = default;
  // The NCCL communicator (once); destroy it before this backend (it uses the CUDA context).
  virtual std::unique_ptr<Communicator> takeCommunicator() = 0;
  // Builds the CUDA model on this rank's device (for TrainingOptions::buildModel).
  virtual ModelFactory modelFactory() = 0;
  virtual std::string deviceName() const = 0;  // "cuda:0 (NVIDIA H100 80GB HBM3)"
};

// Checks that a device is visible first: "--backend nccl: no CUDA device visible (<reason>)"
// (InvalidArgument, exit 2) when none is. Collective over the session's ranks.
StatusOr<std::unique_ptr<NcclBackend>> makeNcclBackend(const MpiSession& session);

}  // namespace ddpscope::runtime::nccl
