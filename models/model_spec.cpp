#include "models/model_spec.h"

#include <algorithm>
#include <array>
#include <utility>

namespace ddpscope::models {

namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int64_t bytes;
};

// Order = the order listed in error messages.
constexpr std::array<DTypeInfo, 9> kDTypes = {{
    {DType::kFloat32, "float32", 4},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat64, "float64", 8},
    {DType::kInt64, "int64", 8},
    {DType::kInt32, "int32", 4},
    {DType::kInt8, "int8", 1},
    {DType::kUInt8, "uint8", 1},
    {DType::kBool, "bool", 1},
}};

const DTypeInfo& dtypeInfo(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  DDPSCOPE_CHECK_MSG(false, "unknown DType value");
  return kDTypes[0];
}

int64_t shapeNumel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) numel *= dim;
  return numel;
}

}  // namespace

StatusOr<DType> parseDType(std::string_view name) {
  // torch's own spelling ("torch.float32", as str(tensor.dtype) prints it) is accepted too.
  std::string_view bare = name;
  if (bare.starts_with("torch.")) bare.remove_prefix(6);
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == bare) return info.dtype;
  }
  std::string expected;
  for (const DTypeInfo& info : kDTypes) {
    if (!expected.empty()) expected += ", ";
    expected += info.name;
  }
  return invalidArgument("expected one of " + expected + "; got \"" + std::string(name) + "\"");
}

std::string_view dtypeName(DType dtype) {
  return dtypeInfo(dtype).name;
}

int64_t dtypeBytes(DType dtype) {
  return dtypeInfo(dtype).bytes;
}

double CostPoly::evaluate(const ModelInputs& inputs) const {
  double total = 0;
  for (const Term& term : terms) {
    double value = term.coef;
    for (int i = 0; i < term.batchPow; ++i) value *= static_cast<double>(inputs.batch);
    for (int i = 0; i < term.seqPow; ++i) value *= static_cast<double>(inputs.seqLen);
    for (int i = 0; i < term.imagePow; ++i) value *= static_cast<double>(inputs.imageSize);
    total += value;
  }
  return total;
}

int64_t ParamSpec::numel() const {
  return shapeNumel(shape);
}
int64_t ParamSpec::bytes() const {
  return numel() * dtypeBytes(dtype);
}
int64_t BufferSpec::numel() const {
  return shapeNumel(shape);
}
int64_t BufferSpec::bytes() const {
  return numel() * dtypeBytes(dtype);
}

bool UsePattern::usedIn(int64_t iteration, int rank) const {
  if (period > 1) {
    // Iterations are 1-based; the modulo is kept non-negative for iteration < 1.
    int64_t slot = ((iteration - 1) % period + period) % period;
    if (slot != phase) return false;
  }
  return ranks.empty() || std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

double LayerSpec::backwardFlopsAt(const ModelInputs& inputs) const {
  if (backwardFlops) return backwardFlops->evaluate(inputs);
  double forward = forwardFlops.evaluate(inputs);
  return params.empty() ? forward : 2 * forward;
}

std::vector<int> defaultGradReadyOrder(std::string_view layerType, const std::vector<int>& params) {
  static constexpr std::array<std::string_view, 4> kBiasFirstTypes = {
      "Linear", "Conv1D", "MultiheadAttention", "NonDynamicallyQuantizableLinear"};
  std::vector<int> order = params;
  if (std::find(kBiasFirstTypes.begin(), kBiasFirstTypes.end(), layerType) !=
      kBiasFirstTypes.end()) {
    std::reverse(order.begin(), order.end());
  }
  return order;
}

int64_t ModelSpec::numParams() const {
  int64_t total = 0;
  for (const ParamSpec& param : params) total += param.numel();
  return total;
}

int64_t ModelSpec::totalBytes() const {
  int64_t total = 0;
  for (const ParamSpec& param : params) total += param.bytes();
  return total;
}

std::vector<int> ModelSpec::gradReadyOrder(bool autocast) const {
  const int numParamTensors = static_cast<int>(params.size());
  // A shared parameter's gradient is complete only after its earliest-executed owner's
  // backward (the last one autograd reaches), so it is listed there.
  std::vector<int> earliestOwner(numParamTensors, -1);
  for (int layer = 0; layer < static_cast<int>(layers.size()); ++layer) {
    for (int param : layers[layer].params) {
      if (param >= 0 && param < numParamTensors && earliestOwner[param] < 0) {
        earliestOwner[param] = layer;
      }
    }
  }
  std::vector<int> order;
  order.reserve(params.size());
  for (int layer = static_cast<int>(layers.size()) - 1; layer >= 0; --layer) {
    for (int param : layerGradReadyOrder(layer, autocast)) {
      if (param >= 0 && param < numParamTensors && earliestOwner[param] == layer) {
        order.push_back(param);
      }
    }
  }
  for (int param = numParamTensors - 1; param >= 0; --param) {
    if (earliestOwner[param] < 0) order.push_back(param);
  }
  return order;
}

std::vector<int> ModelSpec::layerGradReadyOrder(int layer, bool autocast) const {
  const LayerSpec& spec = layers.at(static_cast<size_t>(layer));
  std::vector<int> order = spec.gradReadyOrder.empty() ? spec.params : spec.gradReadyOrder;
  if (autocast && spec.type == "Linear") {  // weights first
    const int numParamTensors = static_cast<int>(params.size());
    std::stable_partition(order.begin(), order.end(), [&](int param) {
      return param >= 0 && param < numParamTensors && params[param].name.ends_with(".weight");
    });
  }
  return order;
}

int ModelSpec::findParam(std::string_view paramName) const {
  for (int i = 0; i < static_cast<int>(params.size()); ++i) {
    if (params[i].name == paramName) return i;
  }
  return -1;
}

int ModelSpec::findLayer(std::string_view layerName) const {
  for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
    if (layers[i].name == layerName) return i;
  }
  return -1;
}

StatusOr<ModelSpec> ModelSpec::withLayerOrder(const std::vector<int>& order) const {
  const int numLayers = static_cast<int>(layers.size());
  std::vector<bool> seen(layers.size(), false);
  bool permutation = static_cast<int>(order.size()) == numLayers;
  for (int l : order) {
    if (!permutation) break;
    permutation = l >= 0 && l < numLayers && !seen[static_cast<size_t>(l)];
    if (permutation) seen[static_cast<size_t>(l)] = true;
  }
  if (!permutation) {
    return invalidArgument("model '" + name + "': a layer order must list each of its " +
                           std::to_string(numLayers) + " layers once");
  }
  ModelSpec out = *this;
  out.layers.clear();
  out.layers.reserve(layers.size());
  for (int l : order) {
    LayerSpec layer = layers[static_cast<size_t>(l)];
    if (layer.inputs.empty()) {
      layer.inputs.push_back(l == 0 ? std::string(kModelInputName)
                                    : layers[static_cast<size_t>(l - 1)].name);
    }
    out.layers.push_back(std::move(layer));
  }
  return out;
}

double ModelSpec::forwardFlops(const ModelInputs& inputs) const {
  double total = 0;
  for (const LayerSpec& layer : layers) total += layer.forwardFlops.evaluate(inputs);
  return total;
}

HostOps hostOps(const LayerSpec& layer, bool autocast) {
  struct Rule {
    std::string_view type;
    int forward, backward;
    bool casts;  // under autocast each of its parameters is cast: one more backward node each
    bool moduleCall;
    // CUDA runtime calls per pass under bf16 autocast (PyTorch 2.11, the H100 and H200 kits'
    // traces, scripts/gpu_kit/host_facts.py's runtime events): fixed plus per parameter
    double forwardLaunches, forwardLaunchesPerParam, backwardLaunches, backwardLaunchesPerParam;
  };
  // From the PyTorch 2.11 H100 traces (scripts/gpu_kit/host_facts.py): e.g. an autocast Conv2d
  // runs ConvolutionBackward0 and the weight's ToCopyBackward0; a Linear addmm's AddmmBackward0,
  // TBackward0, views and the casts of weight and bias; Hugging Face's Conv1D view → addmm →
  // view. Launches: a convolution's forward is cuDNN's plan and kernels (4.3 calls), its
  // backward data and weight gradients (9.3); BatchNorm2d's forward 4 (the statistics, the
  // normalization, the running-stat update, the batch counter); an embedding's backward sorts
  // its indices (22.4); a Linear's GEMM and its casts, in backward two GEMMs, the bias reduction
  // and the casts back (4 per parameter). The runtime's state queries (cudaGetErrorString,
  // cudaPeekAtLastError, cudaStreamIsCapturing, ...: traces::RuntimeCall::kQuery) enqueue
  // nothing and are not counted: the means over both kits' layers of each type.
  static constexpr Rule kRules[] = {
      {"Conv2d", 1, 1, true, true, 3.3, 1, 8.3, 1},
      {"Linear", 1, 4, true, true, 1.8, 1, 0, 4},
      {"Conv1D", 3, 3, true, true, 1.75, 1, 2.75, 2},
      {"BatchNorm2d", 2, 1, false, true, 4, 0, 1, 0},
      {"LayerNorm", 1, 1, false, true, 1, 0, 2.6, 0},
      {"Embedding", 1, 1, false, true, 1, 0, 22.4, 0},
      {"AttentionCore", 9, 9, false, false, 3.3, 0, 8.1, 0},
      {"Add", 1, 1, false, false, 1, 0, 0.2, 0},
      {"SelectToken", 1, 1, false, false, 0, 0, 3, 0},
      {"ClassToken", 1, 1, false, false, 1, 0, 2, 0},
      {"AddParameter", 1, 1, false, false, 1, 0, 1, 0},
      {"Dropout", 1, 1, false, true, 0, 0, 1, 0},
      {"MaxPool2d", 1, 1, false, true, 1, 0, 2, 0},
      // The ops a module runs itself, outside its child modules (a model read off a trace:
      // traces/kineto_model.h); their counts come from the trace.
      {"Functional", 1, 1, false, false, 1, 0, 1, 0},
      // The Llama-style decoder (llama-small), counted from what its modules call, not yet
      // from a trace: nn.RMSNorm is one fused op on CUDA (aten::_fused_rms_norm) with one
      // backward node; rotary embeddings run q*cos + rotate_half(q)*sin for q and k (mul, neg,
      // cat, mul, add each; 14 backward nodes with the slices); SwiGLU is silu(gate) * up.
      {"RMSNorm", 1, 1, false, true, 1, 0, 3, 0},
      {"RotaryEmbedding", 10, 14, false, false, 7, 0, 12, 0},
      {"SwiGLU", 2, 2, false, true, 1, 0, 2, 0},
  };
  HostOps out;
  for (const Rule& r : kRules) {
    if (layer.type != r.type) continue;
    const int casts = r.casts ? static_cast<int>(layer.params.size()) : 0;
    const double params = static_cast<double>(layer.params.size());
    out.forward = r.forward;
    out.backward = r.backward + (autocast ? casts : 0);
    out.moduleCall = r.moduleCall;
    // Without autocast no parameter is cast: one launch fewer per cast in each pass.
    out.forwardLaunches = std::max(
        0.0, r.forwardLaunches + r.forwardLaunchesPerParam * params - (autocast ? 0 : casts));
    out.backwardLaunches = std::max(
        0.0, r.backwardLaunches + r.backwardLaunchesPerParam * params - (autocast ? 0 : casts));
    break;
  }
  if (layer.forwardOps >= 0) out.forward = layer.forwardOps;
  if (layer.backwardOps >= 0) out.backward = layer.backwardOps;
  if (layer.forwardLaunches >= 0) out.forwardLaunches = layer.forwardLaunches;
  if (layer.backwardLaunches >= 0) out.backwardLaunches = layer.backwardLaunches;
  return out;
}

}  // namespace ddpscope::models
