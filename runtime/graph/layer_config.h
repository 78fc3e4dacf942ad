// Layer configurations: a LayerSpec's attributes and its bound parameters and buffers, read and
// checked ONCE for both backends. The CPU factory (cpu::makeLayer) and the CUDA factory
// (cuda::makeCudaLayer) build their layers from the same LayerConfig, so attribute defaults,
// parameter counts and shapes, the supported types and every error text are one piece of code.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

// What a layer needs from the model at construction.
struct LayerBinding {
  std::vector<Param*> params;    // the LayerSpec's params, in module order
  std::vector<Buffer*> buffers;  // BatchNorm: running_mean, running_var, num_batches_tracked
  bool syncBatchNorm = false;    // BatchNorm2d runs as SyncBatchNorm
};

// Binds the layers of one model to its parameters (by index) and buffers (by name,
// layerBufferNames; a missing buffer binds null). The spans must outlive the binder.
class LayerBinder {
 public:
  LayerBinder(std::span<Param> params, std::span<Buffer> buffers, bool syncBatchNorm);
  LayerBinding bind(const models::LayerSpec& spec) const;

 private:
  std::span<Param> m_params;
  std::unordered_map<std::string, Buffer*> m_bufferByName;
  bool m_syncBatchNorm;
};

enum class ActivationKind { kRelu, kRelu6, kTanh, kGeluTanh, kGeluErf };

// Linear (weight [out, in], y = x·Wᵀ + b) or, when weightInOut, Hugging Face Conv1D
// (weight [in, out], y = x·W + b). bias may be null.
struct LinearConfig {
  int64_t inFeatures = 0, outFeatures = 0;
  bool weightInOut = false;
  Param* weight = nullptr;
  Param* bias = nullptr;
};
struct ActivationConfig {
  ActivationKind kind = ActivationKind::kRelu;
};
struct LayerNormConfig {  // over the last dimension; weight and bias may be null
  int64_t width = 0;
  double eps = 1e-5;
  Param* weight = nullptr;
  Param* bias = nullptr;
};
struct EmbeddingConfig {
  int64_t numEmbeddings = 0, dim = 0;
  bool positional = false;  // rows are the positions 0..T-1 of the [.., T] input, not its values
  Param* weight = nullptr;
};
struct AddConfig {};
struct IdentityConfig {};  // Dropout (disabled), Identity
struct AttentionCoreConfig {
  int64_t numHeads = 0, headDim = 0;
  bool causal = false;
};
struct Conv2dConfig {  // groups = 1; bias may be null
  int64_t inChannels = 0, outChannels = 0, kernel = 0, stride = 1, padding = 0;
  Param* weight = nullptr;
  Param* bias = nullptr;
};
struct BatchNorm2dConfig {  // training mode; sync: SyncBatchNorm
  int64_t channels = 0;
  double eps = 1e-5, momentum = 0.1;
  bool sync = false;
  Param* weight = nullptr;
  Param* bias = nullptr;
  Buffer* runningMean = nullptr;
  Buffer* runningVar = nullptr;
  Buffer* numBatchesTracked = nullptr;
};
struct MaxPool2dConfig {
  int64_t kernel = 0, stride = 0, padding = 0;
};
struct AdaptiveAvgPool2dConfig {
  int64_t outputSize = 1;
};

using LayerConfig = std::variant<LinearConfig, ActivationConfig, LayerNormConfig, EmbeddingConfig,
                                 AddConfig, IdentityConfig, AttentionCoreConfig, Conv2dConfig,
                                 BatchNorm2dConfig, MaxPool2dConfig, AdaptiveAvgPool2dConfig>;

// Reads and checks spec's attributes and binding: "layer L: missing attribute 'in_features'",
// "layer L: parameter P has shape [..], expected [..]", "layer L: unsupported layer type 'X'
// (supported: ...)", ...
StatusOr<LayerConfig> parseLayerConfig(const models::LayerSpec& spec, const LayerBinding& binding);

// "Add, AdaptiveAvgPool2d, ..." — the types parseLayerConfig accepts.
std::string supportedLayerTypes();
bool isSupportedLayerType(std::string_view type);
// The first layer of an unsupported type: "model M: layer L: unsupported layer type 'X'
// (supported: ...)".
Status checkSupportedLayers(const models::ModelSpec& spec);

// An integer attribute read without checks (truncated), `fallback` when absent — for code that
// reads an already checked spec (initialisation, synthetic data).
int64_t attrOr(const models::LayerSpec& spec, const char* key, int64_t fallback);

// Names of the buffers a layer of this type needs, given its name (BatchNorm: three).
std::vector<std::string> layerBufferNames(const models::LayerSpec& spec);

}  // namespace ddpscope::runtime
