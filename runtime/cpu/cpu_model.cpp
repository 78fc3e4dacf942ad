#include "runtime/cpu/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cpu/layer.h"
#include "runtime/cpu/loss.h"
#include "runtime/cpu/random.h"
#include "runtime/cpu/synthetic_data.h"
#include "runtime/graph/layer_config.h"
#include "runtime/graph/layer_contract.h"
#include "runtime/graph/model_graph.h"

namespace ddpscope::runtime::cpu {

namespace {

constexpr uint64_t kInitStream = 0x1A17;

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// PyTorch-like initialisation, by the type of the parameter's first owner:
// Linear: U(±1/√in) for weight and bias (kaiming_uniform(a=√5) and the default bias init);
// Conv2d: N(0, √(2/fan_out)) (torchvision ResNet's kaiming_normal, mode fan_out, relu), bias 0;
// Conv1D / Embedding (Hugging Face GPT-2): N(0, 0.02), c_proj weights N(0, 0.02/√(2·n_layer)),
// bias 0; norms: weight 1, bias 0; anything else N(0, 0.02).
void initParam(Param& p, int index, const models::LayerSpec* owner, int64_t attentionLayers,
               uint64_t seed) {
  Rng rng(mixKeys(seed, static_cast<uint64_t>(index), kInitStream));
  const bool isBias = endsWith(p.name, "bias");
  auto normal = [&](double std) {
    for (float& v : p.value.values()) v = static_cast<float>(rng.normal() * std);
  };
  auto uniform = [&](double bound) {
    for (float& v : p.value.values()) v = static_cast<float>(rng.uniform(-bound, bound));
  };
  const std::string type = owner != nullptr ? owner->type : std::string();
  if (type == "Linear") {
    uniform(1.0 /
            std::sqrt(static_cast<double>(std::max<int64_t>(1, attrOr(*owner, "in_features", 1)))));
  } else if (type == "Conv2d") {
    if (isBias) {
      p.value.fill(0.0f);
    } else {
      const int64_t k = attrOr(*owner, "kernel_size", 1);
      normal(std::sqrt(2.0 / static_cast<double>(attrOr(*owner, "out_channels", 1) * k * k)));
    }
  } else if (type == "LayerNorm" || type == "BatchNorm2d" || type == "SyncBatchNorm") {
    p.value.fill(isBias ? 0.0f : 1.0f);
  } else if (isBias) {
    p.value.fill(0.0f);
  } else if (type == "Conv1D" && endsWith(p.name, "c_proj.weight") && attentionLayers > 0) {
    normal(0.02 / std::sqrt(2.0 * static_cast<double>(attentionLayers)));
  } else {
    normal(0.02);
  }
}

void initBuffer(Buffer& b) {
  if (endsWith(b.name, "running_var")) {
    b.value.fill(1.0f);
  } else if (endsWith(b.name, "attn.bias") && b.value.rank() == 4) {
    // GPT-2's causal mask: lower-triangular ones (bool stored as float).
    const int64_t n = b.value.dim(2), m = b.value.dim(3);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) b.value[i * m + j] = j <= i ? 1.0f : 0.0f;
    }
  } else if (endsWith(b.name, "masked_bias")) {
    b.value.fill(-1e4f);
  } else {
    b.value.fill(0.0f);
  }
}

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
  m_params.resize(spec.params.size());
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const models::ParamSpec& ps = spec.params[i];
    if (ps.dtype != models::DType::kFloat32) {
      return invalidArgument("parameter " + ps.name + " is " +
                             std::string(models::dtypeName(ps.dtype)) +
                             "; the CPU runtime trains float32 only");
    }
    m_params[i].name = ps.name;
    m_params[i].value = Tensor(ps.shape);
    m_params[i].grad = Tensor(ps.shape);
  }
  m_buffers.resize(spec.buffers.size());
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    m_buffers[i].name = spec.buffers[i].name;
    m_buffers[i].value = Tensor(spec.buffers[i].shape);
    initBuffer(m_buffers[i]);
  }
  // Parameter init, by first owner.
  std::vector<const models::LayerSpec*> firstOwner(spec.params.size(), nullptr);
  int64_t attentionLayers = 0;
  for (const models::LayerSpec& layer : spec.layers) {
    if (layer.type == "AttentionCore") ++attentionLayers;
    for (int p : layer.params) {
      if (p < 0 || p >= static_cast<int>(spec.params.size())) {
        return invalidArgument("layer " + layer.name + ": parameter index " + std::to_string(p) +
                               " out of range");
      }
      if (firstOwner[static_cast<size_t>(p)] == nullptr)
        firstOwner[static_cast<size_t>(p)] = &layer;
    }
  }
  for (size_t i = 0; i < m_params.size(); ++i) {
    initParam(m_params[i], static_cast<int>(i), firstOwner[i], attentionLayers, options.seed);
  }
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
  if (task.kind == TaskKind::kLanguageModel) {
    for (const models::LayerSpec& ls : spec.layers) {
      if (ls.type == "Embedding" && (attrOr(ls, "num_embeddings", 0) < task.seqLen) &&
          ls.name != spec.layers.front().name) {
        return invalidArgument("sequence length " + std::to_string(task.seqLen) + " exceeds " +
                               ls.name + "'s " + std::to_string(attrOr(ls, "num_embeddings", 0)) +
                               " positions");
      }
    }
  }
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
