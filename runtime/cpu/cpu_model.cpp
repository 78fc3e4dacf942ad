#include "runtime/cpu/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cpu/layer.h"
#include "runtime/cpu/loss.h"
#include "runtime/graph/layer_config.h"
#include "runtime/graph/layer_contract.h"
#include "runtime/graph/loss_choice.h"
#include "runtime/graph/model_graph.h"
#include "runtime/graph/param_init.h"
#include "runtime/graph/synthetic_data.h"

namespace ddpscope::runtime::cpu {

namespace {

// ModelLayers (private base): the layers and their tensors, run by ModelGraph's walks; the
// observer's Begin/End calls bracket each layer.
class CpuModel final : public TrainableModel, private ModelLayers<Tensor, LayerContext> {
 public:
  CpuModel(models::ModelSpec spec, TaskInfo task) : m_spec(std::move(spec)), m_data(task) {
    layerContext() = LayerContext{&m_workspace, &m_syncAllreduce};
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

 private:
  Status beginLayer(int layer, bool backward) override;
  Status endLayer(int layer, bool backward) override;
  int tiedHeadParam() const;

  models::ModelSpec m_spec;
  SyntheticData m_data;
  std::vector<Param> m_params;
  std::vector<Buffer> m_buffers;
  ModelGraph m_graph;  // what runs, reachability, gradient-ready points, the walks
  std::unique_ptr<LossHead> m_loss;
  Tensor m_targets;
  std::vector<Tensor> m_momentum;
  std::vector<bool> m_momentumDefined;
  Workspace m_workspace;
  SyncAllreduceFn m_syncAllreduce;
  LayerObserver* m_observer = nullptr;
};

Status CpuModel::init(const BuildOptions& options) {
  const models::ModelSpec& spec = m_spec;
  ASSIGN_OR_RETURN(m_params, initialParams(spec, options.seed));
  for (Param& p : m_params) p.grad = Tensor(p.value.shape());
  m_buffers = initialBuffers(spec);
  // Layers and edges.
  ASSIGN_OR_RETURN(m_graph, ModelGraph::build(spec));
  resizeLayers(spec.layers.size());
  const LayerBinder binder(m_params, m_buffers, options.syncBatchNorm);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const models::LayerSpec& ls = spec.layers[i];
    ASSIGN_OR_RETURN(node(static_cast<int>(i)).layer, makeLayer(ls, binder.bind(ls)));
  }
  const TaskInfo& task = m_data.task();
  const LossChoice loss = lossFor(task, m_params);
  m_loss = std::make_unique<LossHead>(loss.kind, loss.tiedWeight);
  RETURN_IF_ERROR(checkSequenceFits(spec, task));
  m_momentum.resize(m_params.size());
  m_momentumDefined.assign(m_params.size(), false);
  return Status::ok();
}

int CpuModel::tiedHeadParam() const {
  const Param* head = m_loss->tiedWeight();
  return head ? static_cast<int>(head - m_params.data()) : -1;
}

Status CpuModel::beginLayer(int layer, bool backward) {
  if (m_observer == nullptr) return Status::ok();
  if (backward) {
    m_observer->onBackwardBegin(layer);
  } else {
    m_observer->onForwardBegin(layer);
  }
  return Status::ok();
}

Status CpuModel::endLayer(int layer, bool backward) {
  if (m_observer == nullptr) return Status::ok();
  if (backward) {
    m_observer->onBackwardEnd(layer);
  } else {
    m_observer->onForwardEnd(layer);
  }
  return Status::ok();
}

StatusOr<ForwardResult> CpuModel::forward(const Batch& batch, int64_t iteration, int rank) {
  startForward();
  Tensor& input = modelInput();
  input.resize(batch.inputs.shape());
  std::copy(batch.inputs.values().begin(), batch.inputs.values().end(), input.values().begin());
  m_targets.resize(batch.targets.shape());
  std::copy(batch.targets.values().begin(), batch.targets.values().end(),
            m_targets.values().begin());
  ForwardResult result;
  RETURN_IF_ERROR(m_graph.runForward(m_spec, iteration, rank, tiedHeadParam(), *this, &result));
  return completeForward(m_spec.name, m_loss->forward(outputNode().output, m_targets),
                         std::move(result));
}

Status CpuModel::backward(const std::function<Status(int paramIndex)>& onGradReady) {
  RETURN_IF_ERROR(startBackward(m_spec.name));
  Node& last = outputNode();
  RETURN_IF_ERROR(m_loss->backward(last.output, m_targets, last.grad, 1.0f));
  return m_graph.runBackward(m_spec, tiedHeadParam(), *this, onGradReady);
}

void CpuModel::zeroGrad() {
  for (Param& p : m_params) {
    p.gradDefined = false;
    p.grad.fill(0.0f);
  }
}

void CpuModel::sgdStep(double learningRate, double momentum) {
  const float lr = static_cast<float>(learningRate), m = static_cast<float>(momentum);
  for (size_t i = 0; i < m_params.size(); ++i) {
    Param& p = m_params[i];
    if (!p.gradDefined) continue;
    float* w = p.value.data();
    const float* g = p.grad.data();
    const int64_t n = p.value.numel();
    if (momentum == 0.0) {
      for (int64_t j = 0; j < n; ++j) w[j] -= lr * g[j];
      continue;
    }
    Tensor& buf = m_momentum[i];
    if (!m_momentumDefined[i]) {
      buf = p.grad;  // first step: buf = g
      m_momentumDefined[i] = true;
    } else {
      float* b = buf.data();
      for (int64_t j = 0; j < n; ++j) b[j] = m * b[j] + g[j];
    }
    const float* b = buf.data();
    for (int64_t j = 0; j < n; ++j) w[j] -= lr * b[j];
  }
}

}  // namespace

StatusOr<std::unique_ptr<TrainableModel>> buildCpuModel(const models::ModelSpec& spec,
                                                        const BuildOptions& options) {
  RETURN_IF_ERROR(checkSupportedLayers(spec));
  ASSIGN_OR_RETURN(TaskInfo task, deriveTask(spec, options.inputs));
  auto model = std::make_unique<CpuModel>(spec, task);
  Status status = model->init(options);
  if (!status.isOk()) return status.withContext("model " + spec.name);
  return std::unique_ptr<TrainableModel>(std::move(model));
}

}  // namespace ddpscope::runtime::cpu

namespace ddpscope::runtime {

StatusOr<std::unique_ptr<TrainableModel>> buildTrainableModel(const models::ModelSpec& spec,
                                                              const BuildOptions& options) {
  return cpu::buildCpuModel(spec, options);
}

}  // namespace ddpscope::runtime
