#include "runtime/nccl/nccl_backend.h"

#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_model.h"
#include "runtime/mpi/mpi_communicator.h"
#include "runtime/nccl/nccl_communicator.h"
#include "runtime/nccl/nccl_host_logic.h"

namespace ddpscope::runtime::nccl {
namespace {

class NcclBackendImpl final : public NcclBackend {
 public:
  NcclBackendImpl(std::unique_ptr<cuda::CudaContext> context,
                  std::unique_ptr<Communicator> communicator)
      : m_context(std::move(context)), m_communicator(std::move(communicator)) {}
  ~NcclBackendImpl() override {
    m_communicator.reset();  // before the context whose streams it uses
    m_context.reset();
  }
  std::unique_ptr<Communicator> takeCommunicator() override { return std::move(m_communicator); }
  ModelFactory modelFactory() override {
    cuda::CudaContext* context = m_context.get();
    return [context](const models::ModelSpec& spec, const BuildOptions& options) {
      BuildOptions onDevice = options;
      onDevice.cudaDevice = context->device();
      return cuda::buildCudaModel(spec, onDevice, *context);
    };
  }
  std::string deviceName() const override {
    return "cuda:" + std::to_string(m_context->device()) + " (" + m_context->deviceName() + ")";
  }

 private:
  std::unique_ptr<cuda::CudaContext> m_context;
  std::unique_ptr<Communicator> m_communicator;
};

}  // namespace

StatusOr<std::unique_ptr<NcclBackend>> makeNcclBackend(const MpiSession& session) {
  const cuda::DeviceProbe probe = cuda::probeDevices();
  if (probe.count <= 0) {
    return invalidArgument("--backend nccl: no CUDA device visible (" + probe.reason + ")");
  }
  ASSIGN_OR_RETURN(int device, nccl::chooseDevice(session.rank(), nccl::localRankFromEnvironment(),
                                                  probe.count));
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaContext> context, cuda::CudaContext::create(device));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> communicator,
                   nccl::makeNcclCommunicator(session, *context));
  return std::unique_ptr<NcclBackend>(
      new NcclBackendImpl(std::move(context), std::move(communicator)));
}

}  // namespace ddpscope::runtime::nccl
