// GPU tests of the NCCL communicator and the DDP engine on CUDA (label gpu), run under
// mpirun -np 1 (world 1 on one GPU). Every test skips when no CUDA device is visible.
#include "runtime/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <mutex>
#include <numeric>

#include "models/builders.h"
#include "models/zoo.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/cuda/cuda_model.h"
#include "runtime/mpi/mpi_communicator.h"
#include "runtime/training.h"
#include "tests/status_matchers.h"

namespace ddpscope::runtime::nccl {
namespace {

MpiSession* g_session = nullptr;

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const cuda::DeviceProbe probe = cuda::probeDevices();
    if (probe.count < g_session->worldSize()) {
      GTEST_SKIP() << "needs " << g_session->worldSize() << " CUDA device(s), found " << probe.count
                   << " (" << probe.reason << ")";
    }
    auto context = cuda::CudaContext::create(g_session->rank());
    ASSERT_TRUE(context.isOk()) << context.status().message();
    m_context = std::move(context).value();
    auto comm = makeNcclCommunicator(*g_session, *m_context);
    ASSERT_TRUE(comm.isOk()) << comm.status().message();
    m_comm = std::move(comm).value();
  }
  void TearDown() override {
    m_comm.reset();
    m_context.reset();
  }
  float* deviceFloats(const std::vector<float>& values) {
    float* p = nullptr;
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), values.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, values.data(), values.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    m_allocations.push_back(p);
    return p;
  }
  std::vector<float> hostCopy(const float* p, size_t n) {
    std::vector<float> out(n);
    EXPECT_EQ(cudaStreamSynchronize(m_context->computeStream()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), p, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  ~NcclTest() override {
    for (float* p : m_allocations) cudaFree(p);
  }
  std::unique_ptr<cuda::CudaContext> m_context;
  std::unique_ptr<Communicator> m_comm;
  std::vector<float*> m_allocations;
};

TEST_F(NcclTest, AllreduceOfDeviceAndHostBuffersSumsOverRanks) {
  const int world = m_comm->worldSize();
  std::vector<float> values(1000);
  std::iota(values.begin(), values.end(), static_cast<float>(m_comm->rank()));
  float* device = deviceFloats(values);
  CommWorkPtr work = m_comm->allreduceAsync(std::span<float>(device, values.size()),
                                            CommTag{"allreduce", traces::Category::kAllreduce});
  ASSERT_OK(work->wait());
  const std::vector<float> got = hostCopy(device, values.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // sum over r of (i + r)
    const float expected =
        static_cast<float>(world * static_cast<int>(i) + world * (world - 1) / 2);
    ASSERT_EQ(got[i], expected) << i;
  }
  std::vector<int32_t> ints = {1, 2, 3};
  ASSERT_OK(m_comm->allreduce(std::span<int32_t>(ints), CommTag{"used_map_allreduce"}));
  EXPECT_EQ(ints, (std::vector<int32_t>{world, 2 * world, 3 * world}));
}

TEST_F(NcclTest, BroadcastAndAllgatherOfHostAndDeviceMemory) {
  const int world = m_comm->worldSize();
  std::vector<float> host = {m_comm->rank() == 0 ? 7.5f : -1.0f, 2.0f};
  ASSERT_TRUE(
      m_comm->broadcast(std::as_writable_bytes(std::span<float>(host)), 0, CommTag{"broadcast"})
          .isOk());
  EXPECT_EQ(host, (std::vector<float>{7.5f, 2.0f}));
  const int64_t mine = 100 + m_comm->rank();
  std::vector<int64_t> all(static_cast<size_t>(world));
  ASSERT_TRUE(m_comm
                  ->allgather(std::as_bytes(std::span<const int64_t>(&mine, 1)),
                              std::as_writable_bytes(std::span<int64_t>(all)), CommTag{"ag"})
                  .isOk());
  for (int r = 0; r < world; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], 100 + r);
  float* device = deviceFloats({static_cast<float>(m_comm->rank() + 1)});
  float* gathered = deviceFloats(std::vector<float>(static_cast<size_t>(world), 0.0f));
  ASSERT_TRUE(m_comm
                  ->allgatherAsync(std::as_bytes(std::span<const float>(device, 1)),
                                   std::as_writable_bytes(std::span<float>(gathered, world)),
                                   CommTag{"ag"})
                  ->wait()
                  .isOk());
  const std::vector<float> got = hostCopy(gathered, static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], r + 1.0f);
}

// The collective reads what the compute stream wrote before it was issued, and wait() orders
// the compute stream's later work after it (no host synchronization in between).
TEST_F(NcclTest, WorkOrdersWithTheComputeStream) {
  const size_t n = 1 << 20;
  float* device = deviceFloats(std::vector<float>(n, 0.0f));
  std::vector<float> ones(n, 1.0f);
  cudaStream_t compute = m_context->computeStream();
  ASSERT_EQ(cudaMemcpyAsync(device, ones.data(), n * 4, cudaMemcpyHostToDevice, compute),
            cudaSuccess);
  CommWorkPtr work = m_comm->allreduceAsync(std::span<float>(device, n), CommTag{"allreduce"});
  ASSERT_OK(work->wait());
  std::vector<float> out(n, -1.0f);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), device, n * 4, cudaMemcpyDeviceToHost, compute),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  const float world = static_cast<float>(m_comm->worldSize());
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(out[i], world) << i;
  EXPECT_TRUE(work->test());
}

class RecordingObserver final : public CommObserver {
 public:
  void onCollective(const CommTag& tag, int64_t bytes, Nanos start, Nanos end) override {
    std::lock_guard lock(mutex);
    spans.push_back({tag.name, tag.bucket, bytes, start, end});
  }
  struct Span {
    std::string name;
    int bucket;
    int64_t bytes;
    Nanos start, end;
  };
  std::mutex mutex;
  std::vector<Span> spans;
};

TEST_F(NcclTest, ObserverSeesEveryRecordedCollectiveWithStartBeforeEnd) {
  RecordingObserver observer;
  m_comm->setObserver(&observer);
  float* device = deviceFloats(std::vector<float>(4096, 1.0f));
  const Nanos before = m_comm->now();
  for (int b = 0; b < 3; ++b) {
    ASSERT_OK(m_comm
                  ->allreduceAsync(std::span<float>(device, 4096),
                                   CommTag{"allreduce", traces::Category::kAllreduce, b, 1})
                  ->wait());
  }
  CommTag hidden{"clock", traces::Category::kCommOther};
  hidden.record = false;
  ASSERT_OK(m_comm->barrier(hidden));
  ASSERT_EQ(cudaStreamSynchronize(m_context->computeStream()), cudaSuccess);
  m_comm->setObserver(nullptr);  // drains: every issued collective has been reported
  const Nanos after = m_comm->now();
  ASSERT_EQ(observer.spans.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    const auto& s = observer.spans[static_cast<size_t>(b)];
    EXPECT_EQ(s.bucket, b);
    EXPECT_EQ(s.bytes, 4096 * 4);
    EXPECT_LT(s.start, s.end);
    EXPECT_GE(s.start, before - Nanos(1'000'000));  // anchor error well under 1 ms
    EXPECT_LE(s.end, after + Nanos(1'000'000));
    if (b > 0) {
      EXPECT_GE(s.start, observer.spans[static_cast<size_t>(b - 1)].end);
    }
  }
}

// DDP on the CUDA model + NCCL at world 1 equals the CPU reference.
void expectCudaDdpEqualsCpuReference(cuda::CudaContext& context, Communicator& comm,
                                     models::ModelSpec model, double tolerance) {
  TrainingOptions o;
  o.model = std::move(model);
  o.globalBatch = 8;
  o.iterations = 4;
  o.learningRate = 0.05;
  o.momentum = 0.9;
  o.build.seed = 11;
  o.dataSeed = 5;
  o.ddp.setBucketCapMb(0.01);  // several buckets
  auto reference = trainReference(o);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  TrainingOptions onGpu = o;
  onGpu.buildModel = [&context](const models::ModelSpec& spec, const BuildOptions& build) {
    return cuda::buildCudaModel(spec, build, context);
  };
  auto ddp = trainDistributed(comm, onGpu);
  ASSERT_TRUE(ddp.isOk()) << ddp.status().message();
  double worst = 0;
  for (size_t p = 0; p < ddp->params.size(); ++p) {
    ASSERT_EQ(ddp->params[p].size(), reference->params[p].size());
    for (size_t i = 0; i < ddp->params[p].size(); ++i) {
      worst = std::max(worst, std::fabs(double{ddp->params[p][i]} - reference->params[p][i]));
    }
  }
  EXPECT_LE(worst, tolerance);
}

TEST_F(NcclTest, DdpOnCudaModelEqualsCpuReferenceMlpTiny) {
  if (m_comm->worldSize() != 1) GTEST_SKIP() << "the reference comparison runs at world 1";
  auto spec = models::loadZooModel("mlp-tiny");
  ASSERT_OK(spec);
  expectCudaDdpEqualsCpuReference(*m_context, *m_comm, *spec, 1e-4);
}

TEST_F(NcclTest, DdpOnCudaModelEqualsCpuReferenceSmallGpt2) {
  if (m_comm->worldSize() != 1) GTEST_SKIP() << "the reference comparison runs at world 1";
  auto spec = models::parseModelShorthand("gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32");
  ASSERT_OK(spec);
  expectCudaDdpEqualsCpuReference(*m_context, *m_comm, *spec, 1e-3);
}

}  // namespace
}  // namespace ddpscope::runtime::nccl

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto session = ddpscope::runtime::MpiSession::init(&argc, &argv);
  if (!session.isOk()) {
    std::fprintf(stderr, "%s\n", session.status().message().c_str());
    return 1;
  }
  ddpscope::runtime::nccl::g_session = session->get();
  return RUN_ALL_TESTS();
}
