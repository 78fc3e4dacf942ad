#include "runtime/graph/layer_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "runtime/graph/tensor.h"

namespace ddpscope::runtime {

namespace {

constexpr std::array<std::string_view, 16> kSupportedTypes = {
    "AdaptiveAvgPool2d", "Add",       "AttentionCore", "BatchNorm2d",  "Conv1D",    "Conv2d",
    "Dropout",           "Embedding", "GELU",          "Identity",     "LayerNorm", "Linear",
    "MaxPool2d",         "ReLU",      "ReLU6",         "SyncBatchNorm"};
constexpr std::string_view kTanh = "Tanh";

// Reads the attributes of one LayerSpec, remembering the first problem.
class Attrs {
 public:
  explicit Attrs(const models::LayerSpec& spec) : m_spec(spec) {}

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    auto it = m_spec.attrs.find(key);
    if (it == m_spec.attrs.end()) {
      if (!fallback) fail("missing attribute '" + key + "'");
      return fallback.value_or(0);
    }
    double v = it->second;
    if (!std::isfinite(v) || v != std::floor(v) || v < 0) {
      fail("attribute '" + key + "' must be a non-negative integer; got " + std::to_string(v));
      return 0;
    }
    return static_cast<int64_t>(v);
  }
  double real(const std::string& key, double fallback) {
    auto it = m_spec.attrs.find(key);
    return it == m_spec.attrs.end() ? fallback : it->second;
  }
  void fail(const std::string& message) {
    if (m_status.isOk()) m_status = invalidArgument(message);
  }
  const Status& status() const { return m_status; }

 private:
  const models::LayerSpec& m_spec;
  Status m_status;
};

Status checkShape(const Param* p, const std::vector<int64_t>& expected) {
  if (p->value.shape() != expected) {
    return invalidArgument("parameter " + p->name + " has shape " + p->value.shapeString() +
                           ", expected " + shapeString(expected));
  }
  return Status::ok();
}

Status checkParamCount(const LayerBinding& binding, size_t lo, size_t hi) {
  size_t n = binding.params.size();
  if (n < lo || n > hi) {
    return invalidArgument("expected " + std::to_string(lo) +
                           (hi != lo ? ".." + std::to_string(hi) : std::string()) +
                           " parameters; got " + std::to_string(n));
  }
  return Status::ok();
}

bool isPositionalEmbedding(const models::LayerSpec& spec) {
  auto it = spec.attrs.find("positional");
  if (it != spec.attrs.end()) return it->second != 0;
  std::string_view name = spec.name;
  size_t dot = name.rfind('.');
  std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  return last == "wpe" || last == "position_embeddings" || last == "position_embedding";
}

StatusOr<LayerConfig> parseUnprefixed(const models::LayerSpec& spec, const LayerBinding& binding) {
  const std::string& type = spec.type;
  Attrs attrs(spec);
  auto param = [&](size_t i) -> Param* {
    return i < binding.params.size() ? binding.params[i] : nullptr;
  };
  if (type == "Linear" || type == "Conv1D") {
    int64_t in = attrs.integer("in_features"), out = attrs.integer("out_features");
    bool bias = attrs.integer("bias", 1) != 0;
    RETURN_IF_ERROR(attrs.status());
    RETURN_IF_ERROR(checkParamCount(binding, bias ? 2 : 1, bias ? 2 : 1));
    const bool inOut = type == "Conv1D";
    RETURN_IF_ERROR(checkShape(
        param(0), inOut ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in}));
    if (bias) RETURN_IF_ERROR(checkShape(param(1), {out}));
    return LayerConfig{LinearConfig{in, out, inOut, param(0), param(1)}};
  }
  if (type == "ReLU" || type == "ReLU6" || type == kTanh || type == "GELU") {
    RETURN_IF_ERROR(checkParamCount(binding, 0, 0));
    if (type == "ReLU") return LayerConfig{ActivationConfig{ActivationKind::kRelu}};
    if (type == "ReLU6") return LayerConfig{ActivationConfig{ActivationKind::kRelu6}};
    if (type == kTanh) return LayerConfig{ActivationConfig{ActivationKind::kTanh}};
    bool tanhApprox = attrs.real("approximate_tanh", 0) != 0;
    return LayerConfig{
        ActivationConfig{tanhApprox ? ActivationKind::kGeluTanh : ActivationKind::kGeluErf}};
  }
  if (type == "LayerNorm") {
    int64_t width = attrs.integer("normalized_shape");
    double eps = attrs.real("eps", 1e-5);
    RETURN_IF_ERROR(attrs.status());
    RETURN_IF_ERROR(checkParamCount(binding, 0, 2));
    for (Param* p : binding.params) RETURN_IF_ERROR(checkShape(p, {width}));
    return LayerConfig{LayerNormConfig{width, eps, param(0), param(1)}};
  }
  if (type == "Embedding") {
    int64_t num = attrs.integer("num_embeddings"), dim = attrs.integer("embedding_dim");
    RETURN_IF_ERROR(attrs.status());
    RETURN_IF_ERROR(checkParamCount(binding, 1, 1));
    RETURN_IF_ERROR(checkShape(param(0), {num, dim}));
    return LayerConfig{EmbeddingConfig{num, dim, isPositionalEmbedding(spec), param(0)}};
  }
  if (type == "Add") return LayerConfig{AddConfig{}};
  if (type == "Dropout" || type == "Identity") {
    RETURN_IF_ERROR(checkParamCount(binding, 0, 0));
    return LayerConfig{IdentityConfig{}};
  }
  if (type == "AttentionCore") {
    int64_t heads = attrs.integer("num_heads"), headDim = attrs.integer("head_dim");
    bool causal = attrs.integer("causal", 0) != 0;
    RETURN_IF_ERROR(attrs.status());
    RETURN_IF_ERROR(checkParamCount(binding, 0, 0));
    if (heads <= 0 || headDim <= 0) return invalidArgument("num_heads and head_dim must be > 0");
    return LayerConfig{AttentionCoreConfig{heads, headDim, causal}};
  }
  if (type == "Conv2d") {
    int64_t cin = attrs.integer("in_channels"), cout = attrs.integer("out_channels");
    int64_t k = attrs.integer("kernel_size"), stride = attrs.integer("stride", 1);
    int64_t pad = attrs.integer("padding", 0), groups = attrs.integer("groups", 1);
    bool bias = attrs.integer("bias", 0) != 0;
    RETURN_IF_ERROR(attrs.status());
    if (groups != 1) {
      return unimplemented("Conv2d with groups=" + std::to_string(groups) +
                           " is not supported (groups=1 only)");
    }
    if (k <= 0 || stride <= 0) return invalidArgument("kernel_size and stride must be > 0");
    RETURN_IF_ERROR(checkParamCount(binding, bias ? 2 : 1, bias ? 2 : 1));
    RETURN_IF_ERROR(checkShape(param(0), {cout, cin, k, k}));
    if (bias) RETURN_IF_ERROR(checkShape(param(1), {cout}));
    return LayerConfig{Conv2dConfig{cin, cout, k, stride, pad, param(0), param(1)}};
  }
  if (type == "BatchNorm2d" || type == "SyncBatchNorm") {
    int64_t c = attrs.integer("num_features");
    double eps = attrs.real("eps", 1e-5), momentum = attrs.real("momentum", 0.1);
    RETURN_IF_ERROR(attrs.status());
    RETURN_IF_ERROR(checkParamCount(binding, 0, 2));
    for (Param* p : binding.params) RETURN_IF_ERROR(checkShape(p, {c}));
    auto buffer = [&](size_t i) -> Buffer* {
      return i < binding.buffers.size() ? binding.buffers[i] : nullptr;
    };
    for (size_t i = 0; i < 2; ++i) {
      if (buffer(i) != nullptr && buffer(i)->value.numel() != c) {
        return invalidArgument("buffer " + buffer(i)->name + " has shape " +
                               buffer(i)->value.shapeString() + ", expected [" + std::to_string(c) +
                               "]");
      }
    }
    bool sync = type == "SyncBatchNorm" || binding.syncBatchNorm;
    return LayerConfig{BatchNorm2dConfig{c, eps, momentum, sync, param(0), param(1), buffer(0),
                                         buffer(1), buffer(2)}};
  }
  if (type == "MaxPool2d") {
    int64_t k = attrs.integer("kernel_size");
    int64_t stride = attrs.integer("stride", k), pad = attrs.integer("padding", 0);
    RETURN_IF_ERROR(attrs.status());
    if (k <= 0 || stride <= 0) return invalidArgument("kernel_size and stride must be > 0");
    // PyTorch's rule: a larger padding lets a window fall entirely into the padding, where no
    // input element (and so no argmax) exists.
    if (pad < 0 || pad > k / 2) {
      return invalidArgument("padding " + std::to_string(pad) +
                             " must be between 0 and kernel_size / 2 = " + std::to_string(k / 2));
    }
    return LayerConfig{MaxPool2dConfig{k, stride, pad}};
  }
  if (type == "AdaptiveAvgPool2d") {
    int64_t out = attrs.integer("output_size", 1);
    RETURN_IF_ERROR(attrs.status());
    if (out <= 0) return invalidArgument("output_size must be > 0");
    return LayerConfig{AdaptiveAvgPool2dConfig{out}};
  }
  return unimplemented("unsupported layer type '" + type +
                       "' (supported: " + supportedLayerTypes() + ")");
}

}  // namespace

LayerBinder::LayerBinder(std::span<Param> params, std::span<Buffer> buffers, bool syncBatchNorm)
    : m_params(params), m_syncBatchNorm(syncBatchNorm) {
  for (Buffer& buffer : buffers) m_bufferByName[buffer.name] = &buffer;
}

LayerBinding LayerBinder::bind(const models::LayerSpec& spec) const {
  LayerBinding binding;
  for (int p : spec.params) binding.params.push_back(&m_params[static_cast<size_t>(p)]);
  for (const std::string& name : layerBufferNames(spec)) {
    auto it = m_bufferByName.find(name);
    binding.buffers.push_back(it == m_bufferByName.end() ? nullptr : it->second);
  }
  binding.syncBatchNorm = m_syncBatchNorm;
  return binding;
}

StatusOr<LayerConfig> parseLayerConfig(const models::LayerSpec& spec, const LayerBinding& binding) {
  StatusOr<LayerConfig> config = parseUnprefixed(spec, binding);
  if (!config.isOk()) {
    return Status(config.status().code(), "layer " + spec.name + ": " + config.status().message());
  }
  return config;
}

std::string supportedLayerTypes() {
  std::vector<std::string_view> names(kSupportedTypes.begin(), kSupportedTypes.end());
  names.push_back(kTanh);
  std::sort(names.begin(), names.end());
  std::string text;
  for (std::string_view name : names) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

bool isSupportedLayerType(std::string_view type) {
  return type == kTanh ||
         std::find(kSupportedTypes.begin(), kSupportedTypes.end(), type) != kSupportedTypes.end();
}

Status checkSupportedLayers(const models::ModelSpec& spec) {
  for (const models::LayerSpec& layer : spec.layers) {
    if (!isSupportedLayerType(layer.type)) {
      return unimplemented("model " + spec.name + ": layer " + layer.name +
                           ": unsupported layer type '" + layer.type +
                           "' (supported: " + supportedLayerTypes() + ")");
    }
  }
  return Status::ok();
}

int64_t attrOr(const models::LayerSpec& spec, const char* key, int64_t fallback) {
  auto it = spec.attrs.find(key);
  return it == spec.attrs.end() ? fallback : static_cast<int64_t>(it->second);
}

std::vector<std::string> layerBufferNames(const models::LayerSpec& spec) {
  if (spec.type == "BatchNorm2d" || spec.type == "SyncBatchNorm") {
    return {spec.name + ".running_mean", spec.name + ".running_var",
            spec.name + ".num_batches_tracked"};
  }
  return {};
}

}  // namespace ddpscope::runtime
