#include "runtime/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_layers.h"
#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/gemm.h"
#include "runtime/cuda/host_logic.h"
#include "runtime/cuda/kernels.h"
#include "runtime/graph/layer_config.h"
#include "runtime/graph/layer_contract.h"
#include "runtime/graph/loss_choice.h"
#include "runtime/graph/model_graph.h"
#include "runtime/graph/param_init.h"
#include "runtime/graph/synthetic_data.h"
#include "traces/timeline.h"

namespace ddpscope::runtime::cuda {

namespace {

constexpr int64_t kArenaAlignFloats = 64;  // 256-byte aligned tensors inside an arena

int64_t alignUp(int64_t n) {
  return ceilDiv(n, kArenaAlignFloats) * kArenaAlignFloats;
}

// ModelLayers (private base): the layers and their device tensors, enqueued by ModelGraph's
// walks; a device-timed span brackets each layer's kernels.
class CudaModel final : public TrainableModel, private ModelLayers<DeviceTensor, CudaLayerContext> {
 public:
  CudaModel(models::ModelSpec spec, TaskInfo task, Precision precision, CudaContext& context)
      : m_spec(std::move(spec)), m_data(task), m_context(context), m_gemm(context, precision) {
    layerContext() = CudaLayerContext{&m_context, &m_gemm, &m_workspace, &m_syncAllreduce};
  }
  ~CudaModel() override {
    cudaStreamSynchronize(m_context.computeStream());
    for (cudaEvent_t e : m_events) cudaEventDestroy(e);
  }

  Status init(const BuildOptions& options);

  const models::ModelSpec& spec() const override { return m_spec; }
  std::span<Param> params() override { return m_params; }
  std::span<Buffer> buffers() override { return m_buffers; }
  Batch makeBatch(std::span<const int64_t> sampleIndices, uint64_t dataSeed) const override {
    return m_data.makeBatch(sampleIndices, dataSeed);
  }
  int64_t datasetSize() const override { return SyntheticData::kDatasetSize; }
  StatusOr<ForwardResult> forward(const Batch& batch, int64_t iteration, int rank) override;
  Status backward(const std::function<Status(int paramIndex)>& onGradReady) override;
  void zeroGrad() override;
  void sgdStep(double learningRate, double momentum) override;
  void setObserver(LayerObserver* observer) override { m_observer = observer; }
  void setSyncAllreduce(SyncAllreduceFn fn) override { m_syncAllreduce = std::move(fn); }
  GradDevice& device() override { return m_context.gradDevice(); }
  Status endIteration() override;

 private:
  // A device-timed span waiting for endIteration(): layer >= 0 → onLayerSpan, else onDeviceSpan.
  struct PendingSpan {
    int layer = -1;
    bool backward = false;
    std::string name;
    cudaEvent_t start = nullptr, end = nullptr;
  };
  Status beginLayer(int layer, bool backward) override { return beginSpan(layer, backward, {}); }
  Status endLayer(int, bool) override { return finishSpan(); }
  int tiedHeadParam() const;

  StatusOr<cudaEvent_t> nextEvent();
  // Records the start event of a span (no-op without an observer); finishSpan the end event.
  Status beginSpan(int layer, bool backward, std::string name);
  Status finishSpan();
  Status reportSpans();
  Status uploadBatch(const Batch& batch);

  models::ModelSpec m_spec;
  SyntheticData m_data;
  CudaContext& m_context;
  Gemm m_gemm;
  DeviceWorkspace m_workspace;
  std::vector<Param> m_params;
  std::vector<Buffer> m_buffers;
  DeviceBuffer m_valueArena, m_gradArena, m_bufferArena;
  std::unique_ptr<CudaLossHead> m_loss;
  DeviceTensor m_targets;
  ModelGraph m_graph;  // shared with the CPU model: what runs, reachability, the walks
  std::vector<DeviceArray<float>> m_momentum;
  std::vector<bool> m_momentumDefined;
  SyncAllreduceFn m_syncAllreduce;
  LayerObserver* m_observer = nullptr;
  std::vector<cudaEvent_t> m_events;
  size_t m_eventsUsed = 0;
  std::vector<PendingSpan> m_spans;
};

Status CudaModel::init(const BuildOptions& options) {
  // Initial values: param_init.h's, the CPU model's too (fp32 on the host), uploaded below.
  ASSIGN_OR_RETURN(std::vector<Param> hostParams, initialParams(m_spec, options.seed));
  std::vector<Buffer> hostBuffers = initialBuffers(m_spec);
  RETURN_IF_ERROR(checkSequenceFits(m_spec, m_data.task()));
  GradDevice& device = m_context.gradDevice();

  auto layOut = [](auto& items, std::vector<int64_t>* offsets) {
    int64_t total = 0;
    for (const auto& item : items) {
      offsets->push_back(total);
      total += alignUp(item.value.numel());
    }
    return total;
  };
  std::vector<int64_t> paramOffsets, bufferOffsets;
  const int64_t paramFloats = layOut(hostParams, &paramOffsets);
  const int64_t bufferFloats = layOut(hostBuffers, &bufferOffsets);
  ASSIGN_OR_RETURN(m_valueArena, device.allocate(paramFloats));
  ASSIGN_OR_RETURN(m_gradArena, device.allocate(paramFloats));
  ASSIGN_OR_RETURN(m_bufferArena, device.allocate(bufferFloats));
  std::vector<float> staging(static_cast<size_t>(std::max(paramFloats, bufferFloats)), 0.0f);

  m_params.resize(hostParams.size());  // never resized again: the views below stay valid
  for (size_t i = 0; i < hostParams.size(); ++i) {
    const Param& h = hostParams[i];
    std::copy(h.value.data(), h.value.data() + h.value.numel(), staging.begin() + paramOffsets[i]);
    m_params[i].name = h.name;
    m_params[i].value.setView(m_valueArena.data() + paramOffsets[i], h.value.shape());
    m_params[i].grad.setView(m_gradArena.data() + paramOffsets[i], h.value.shape());
    m_params[i].gradDefined = false;
  }
  RETURN_IF_ERROR(device.fromHost(m_valueArena.data(), staging.data(), paramFloats));
  m_buffers.resize(hostBuffers.size());
  for (size_t i = 0; i < hostBuffers.size(); ++i) {
    const Buffer& h = hostBuffers[i];
    std::copy(h.value.data(), h.value.data() + h.value.numel(), staging.begin() + bufferOffsets[i]);
    m_buffers[i].name = h.name;
    m_buffers[i].value.setView(m_bufferArena.data() + bufferOffsets[i], h.value.shape());
  }
  RETURN_IF_ERROR(device.fromHost(m_bufferArena.data(), staging.data(), bufferFloats));
  hostParams.clear();
  hostBuffers.clear();

  ASSIGN_OR_RETURN(m_graph, ModelGraph::build(m_spec));
  resizeLayers(m_spec.layers.size());
  const LayerBinder binder(m_params, m_buffers, options.syncBatchNorm);
  for (size_t i = 0; i < m_spec.layers.size(); ++i) {
    const models::LayerSpec& ls = m_spec.layers[i];
    ASSIGN_OR_RETURN(node(static_cast<int>(i)).layer, makeCudaLayer(ls, binder.bind(ls)));
  }
  const TaskInfo& task = m_data.task();
  const LossChoice loss = lossFor(task, m_params);
  m_loss = std::make_unique<CudaLossHead>(loss.kind, loss.tiedWeight);
  m_momentum.resize(m_params.size());
  m_momentumDefined.assign(m_params.size(), false);
  return device.synchronize();
}

StatusOr<cudaEvent_t> CudaModel::nextEvent() {
  if (m_eventsUsed == m_events.size()) {
    cudaEvent_t event = nullptr;
    DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&event));
    m_events.push_back(event);
  }
  return m_events[m_eventsUsed++];
}

Status CudaModel::beginSpan(int layer, bool backward, std::string name) {
  if (m_observer == nullptr) return Status::ok();
  PendingSpan span;
  span.layer = layer;
  span.backward = backward;
  span.name = std::move(name);
  ASSIGN_OR_RETURN(span.start, nextEvent());
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(span.start, m_context.computeStream()));
  m_spans.push_back(std::move(span));
  return Status::ok();
}

Status CudaModel::finishSpan() {
  if (m_observer == nullptr || m_spans.empty() || m_spans.back().end != nullptr) {
    return Status::ok();
  }
  ASSIGN_OR_RETURN(m_spans.back().end, nextEvent());
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaEventRecord(m_spans.back().end, m_context.computeStream()));
  return Status::ok();
}

Status CudaModel::reportSpans() {
  if (m_spans.empty()) return Status::ok();
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m_context.computeStream()));
  std::vector<PendingSpan> spans = std::move(m_spans);
  m_spans.clear();
  m_eventsUsed = 0;
  if (m_observer == nullptr) return Status::ok();
  for (const PendingSpan& span : spans) {
    if (span.end == nullptr) continue;  // an error cut the span short
    ASSIGN_OR_RETURN(Nanos start, m_context.hostTimeOf(span.start));
    ASSIGN_OR_RETURN(Nanos end, m_context.hostTimeOf(span.end));
    if (span.layer >= 0) {
      m_observer->onLayerSpan(span.layer, span.backward, start, end);
    } else {
      m_observer->onDeviceSpan(span.name, start, end);
    }
  }
  return Status::ok();
}

Status CudaModel::endIteration() {
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(m_context.device()));
  RETURN_IF_ERROR(m_context.gradDevice().synchronize());
  return reportSpans();
}

Status CudaModel::uploadBatch(const Batch& batch) {
  const TaskInfo& task = m_data.task();
  if (task.kind == TaskKind::kLanguageModel) {
    // Token ids are checked here, on the host copy, before any kernel gathers with them.
    for (int64_t i = 0; i < batch.inputs.numel(); ++i) {
      const float id = batch.inputs[i];
      if (!(id >= 0) || id >= static_cast<float>(task.vocab) || id != std::floor(id)) {
        return invalidArgument("layer " + m_spec.layers.front().name + ": token id " +
                               std::to_string(static_cast<int64_t>(id)) + " out of range [0, " +
                               std::to_string(task.vocab) + ")");
      }
    }
  }
  DeviceTensor& input = modelInput();
  RETURN_IF_ERROR(input.resize(batch.inputs.shape()));
  RETURN_IF_ERROR(m_targets.resize(batch.targets.shape()));
  // Pageable host memory: cudaMemcpyAsync returns once the source has been staged.
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      input.data(), batch.inputs.data(), static_cast<size_t>(batch.inputs.numel()) * sizeof(float),
      cudaMemcpyHostToDevice, m_context.computeStream()));
  DDPSCOPE_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(m_targets.data(), batch.targets.data(),
                      static_cast<size_t>(batch.targets.numel()) * sizeof(float),
                      cudaMemcpyHostToDevice, m_context.computeStream()));
  return Status::ok();
}

int CudaModel::tiedHeadParam() const {
  const Param* head = m_loss->tiedWeight();
  return head ? static_cast<int>(head - m_params.data()) : -1;
}

StatusOr<ForwardResult> CudaModel::forward(const Batch& batch, int64_t iteration, int rank) {
  startForward();
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(m_context.device()));
  // Spans of an iteration without endIteration() are reported now, against the old anchor.
  RETURN_IF_ERROR(reportSpans());
  RETURN_IF_ERROR(m_context.anchorClock());
  Status upload = uploadBatch(batch);
  if (!upload.isOk()) return upload.withContext("model " + m_spec.name);
  ForwardResult result;
  RETURN_IF_ERROR(m_graph.runForward(m_spec, iteration, rank, tiedHeadParam(), *this, &result));
  RETURN_IF_ERROR(beginSpan(-1, false, std::string(traces::kLossHeadSpan)));
  StatusOr<double> loss =
      m_loss->forward(outputNode().output, m_targets, batch.targets, layerContext());
  RETURN_IF_ERROR(finishSpan());
  return completeForward(m_spec.name, std::move(loss), std::move(result));
}

Status CudaModel::backward(const std::function<Status(int paramIndex)>& onGradReady) {
  RETURN_IF_ERROR(startBackward(m_spec.name));
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(m_context.device()));
  Node& last = outputNode();
  RETURN_IF_ERROR(beginSpan(-1, true, std::string(traces::kLossHeadBackwardSpan)));
  Status lossStatus = m_loss->backward(last.output, m_targets, last.grad, 1.0f, layerContext());
  RETURN_IF_ERROR(finishSpan());
  RETURN_IF_ERROR(lossStatus.withContext("model " + m_spec.name));
  return m_graph.runBackward(m_spec, tiedHeadParam(), *this, onGradReady);
}

void CudaModel::zeroGrad() {
  cudaSetDevice(m_context.device());
  for (Param& p : m_params) {
    p.gradDefined = false;
    kernels::fill(p.grad.data(), p.grad.numel(), 0.0f, m_context.computeStream());
  }
}

void CudaModel::sgdStep(double learningRate, double momentum) {
  cudaSetDevice(m_context.device());
  // Span bookkeeping errors (event creation) surface at endIteration via the sticky error.
  (void)beginSpan(-1, false, "optimizer");
  const float lr = static_cast<float>(learningRate), m = static_cast<float>(momentum);
  for (size_t i = 0; i < m_params.size(); ++i) {
    Param& p = m_params[i];
    if (!p.gradDefined) continue;
    const int64_t n = p.value.numel();
    float* buf = nullptr;
    bool first = false;
    if (momentum != 0.0) {
      if (!m_momentum[i].reserve(n).isOk()) continue;  // OOM: reported by the next sync
      buf = m_momentum[i].data();
      first = !m_momentumDefined[i];
      m_momentumDefined[i] = true;
    }
    kernels::sgdStep(p.value.data(), p.grad.data(), buf, n, lr, m, first,
                     m_context.computeStream());
  }
  (void)finishSpan();
}

}  // namespace

StatusOr<std::unique_ptr<TrainableModel>> buildCudaModel(const models::ModelSpec& spec,
                                                         const BuildOptions& options,
                                                         CudaContext& context) {
  ASSIGN_OR_RETURN(Precision precision, parsePrecision(options.dtype));
  if (options.cudaDevice != context.device()) {
    return invalidArgument("model " + spec.name + ": BuildOptions::cudaDevice " +
                           std::to_string(options.cudaDevice) +
                           " differs from the context's cuda:" + std::to_string(context.device()));
  }
  RETURN_IF_ERROR(checkSupportedLayers(spec));
  ASSIGN_OR_RETURN(TaskInfo task, deriveTask(spec, options.inputs));
  DDPSCOPE_CUDA_RETURN_IF_ERROR(cudaSetDevice(context.device()));
  auto model = std::make_unique<CudaModel>(spec, task, precision, context);
  Status status = model->init(options);
  if (!status.isOk()) return status.withContext("model " + spec.name);
  return std::unique_ptr<TrainableModel>(std::move(model));
}

}  // namespace ddpscope::runtime::cuda
