// ModelSpec: what ddpscope knows about a model, independent of any framework.
//
// - params: every trainable parameter in `model.parameters()` order (PyTorch's
//   registration order: a module's own parameters first, then its children's,
//   recursively). Indices into this vector are "parameter indices" everywhere
//   (bucket plans, ready orders, reducer events) — the same index space as DDP.
// - layers: the modules in *forward execution order*, each naming the parameters
//   it owns (indices into params, in the module's own order) and the order in
//   which autograd makes their gradients ready. Empty for a parameter-only file.
// - buffers: non-trainable state (BatchNorm running stats), for broadcast_buffers.
//
// The JSON format is documented in models/FORMAT.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ddpscope::models {

enum class DType { kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kInt8, kUInt8, kBool };

// "float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool".
StatusOr<DType> parseDType(std::string_view name);
std::string_view dtypeName(DType dtype);
int64_t dtypeBytes(DType dtype);

// Reserved producer name in LayerSpec::inputs: the model's input batch (token ids, images).
inline constexpr std::string_view kModelInputName = "@input";

// Symbolic sizes a model's costs depend on. Zero means "not applicable".
struct ModelInputs {
  int64_t batch = 0;      // samples per rank per step
  int64_t seqLen = 0;     // tokens per sample (transformers)
  int64_t imageSize = 0;  // square image side in pixels (vision models)
};

// A polynomial in the input variables: sum of coef * batch^a * seq^b * image^c.
// JSON: {"batch*seq": 1536.0, "batch*seq*seq": 24.0, "1": 7.0}. Monomials are
// products of the names batch, seq, image joined by '*'; "1" is the constant.
struct CostPoly {
  struct Term {
    double coef = 0;
    int batchPow = 0;
    int seqPow = 0;
    int imagePow = 0;
  };
  std::vector<Term> terms;
  double evaluate(const ModelInputs& inputs) const;
  bool empty() const { return terms.empty(); }
};

struct ParamSpec {
  std::string name;            // e.g. "layer1.0.conv1.weight"
  std::vector<int64_t> shape;  // PyTorch shape, e.g. [64, 64, 3, 3]
  DType dtype = DType::kFloat32;
  bool sparseGrad = false;  // owner is Embedding/EmbeddingBag with sparse=True
  int64_t numel() const;
  int64_t bytes() const;  // numel * element size, no padding
};

struct BufferSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  int64_t numel() const;
  int64_t bytes() const;
};

// When a layer runs. Absent = every iteration on every rank.
// Used in iteration i (1-based) when (i - 1) % period == phase, and only on the
// listed ranks when ranks is non-empty.
struct UsePattern {
  int64_t period = 1;
  int64_t phase = 0;
  std::vector<int> ranks;
  bool usedIn(int64_t iteration, int rank) const;
};

struct LayerSpec {
  std::string name;                       // module path, e.g. "layer1.0.conv1"
  std::string type;                       // "Linear", "Conv2d", "BatchNorm2d", "LayerNorm", ...
  std::vector<int> params;                // indices into ModelSpec::params, module order
  std::vector<int> gradReadyOrder;        // same set as params, in autograd's ready order
  CostPoly forwardFlops;                  // forward FLOPs (multiply-add = 2)
  CostPoly forwardBytes;                  // bytes read + written by the forward kernels
  std::optional<CostPoly> backwardFlops;  // absent: 2x forward for layers with params, 1x otherwise
  std::map<std::string, double> attrs;    // type-specific: in_features, kernel_size, eps, ...
  std::vector<std::string> inputs;        // producer layers (or kModelInputName); empty = previous
  std::optional<UsePattern> use;          // conditional use (find_unused_parameters)
  // What the layer dispatches on the host ("host_ops"): its forward's top-level aten ops and its
  // backward's autograd nodes; -1 = hostOps' default for the type.
  int forwardOps = -1;
  int backwardOps = -1;
  // The CUDA runtime calls those ops and nodes make ("host_ops" forward_launches,
  // backward_launches; a mean over steps may be fractional); -1 = hostOps' default for the type.
  double forwardLaunches = -1;
  double backwardLaunches = -1;

  // Backward FLOPs at `inputs`: backwardFlops if given, else 2x forward for a layer
  // with parameters (input grad + weight grad) and 1x forward without.
  double backwardFlopsAt(const ModelInputs& inputs) const;
};

// The gradient-ready order autograd (PyTorch 1.13) produces for one module's own
// parameters `params` (in module order) when a layer gives no explicit order:
// Linear, Conv1D (Hugging Face), MultiheadAttention and NonDynamicallyQuantizableLinear
// compute addmm(bias, x, W^T), so the bias gradient is ready before the weight's
// (reverse module order); every other type (Conv*, norms, Embedding, ...) uses module order.
std::vector<int> defaultGradReadyOrder(std::string_view layerType, const std::vector<int>& params);

// What a layer costs the host in ops (models/FORMAT.md "host_ops"): the top-level aten ops its
// forward dispatches, the autograd nodes its backward runs (AccumulateGrad excluded: one per
// parameter, counted apart), and whether it is a module call (nn.Module.__call__: its hooks and
// Python) or a functional op inside its parent's forward (Add, the attention core). The layer's
// own counts when given, else the type's default under `autocast` (torch.autocast casts the
// parameters of convolutions and linear layers: one ToCopyBackward node per parameter): the counts
// PyTorch 2.11 dispatched for these types in the H100 kit's traces (docs/spec/host-lane.md).
// With them the CUDA runtime calls each pass makes (kernel launches and the libraries' calls: a
// cuDNN convolution about 7 in forward): the means of the H100 and H200 kits' bf16 autocast
// traces; without autocast one fewer per parameter cast in each pass.
struct HostOps {
  int forward = 1;
  int backward = 1;
  bool moduleCall = true;
  double forwardLaunches = 1;
  double backwardLaunches = 1;
};
HostOps hostOps(const LayerSpec& layer, bool autocast);

struct ModelSpec {
  std::string name;
  std::string origin;  // file path or "zoo:<name>", used in error messages
  std::string description;
  ModelInputs defaultInputs;
  std::vector<ParamSpec> params;  // model.parameters() order
  std::vector<LayerSpec> layers;  // forward execution order; may be empty
  std::vector<BufferSpec> buffers;

  bool hasLayers() const { return !layers.empty(); }
  int64_t numParams() const;  // total elements
  int64_t numTensors() const { return static_cast<int64_t>(params.size()); }
  int64_t totalBytes() const;
  // The order in which autograd makes gradients ready in a plain backward:
  // layers in reverse execution order, each contributing its gradReadyOrder
  // (a parameter shared by several layers is ready at its earliest-executed
  // owner). Parameters owned by no layer come last, in reverse registration
  // order. Without layers: reverse registration order.
  // autocast: the order under torch.autocast, where an nn.Linear ("Linear" layer) makes its
  // weight's gradient ready before its bias's.
  std::vector<int> gradReadyOrder(bool autocast = false) const;
  // One layer's part of that order: its gradReadyOrder (its params when that is empty), under
  // autocast an nn.Linear's weights first. What gradReadyOrder() concatenates and what the
  // simulator's hooks fire in, so that the buckets it rebuilds are the ones PyTorch builds.
  std::vector<int> layerGradReadyOrder(int layer, bool autocast = false) const;

  // Index of the parameter or layer with this name, or -1.
  int findParam(std::string_view paramName) const;
  int findLayer(std::string_view layerName) const;
  // Sum of all layers' forward FLOPs at `inputs` (0 without layers).
  double forwardFlops(const ModelInputs& inputs) const;
  // The same model with its layers run in `order` (a permutation of the layer indices: new
  // position → old index), as a job whose forward calls the modules in another order than this
  // model lists them (e.g. a residual block computing its downsample before its main branch).
  // Parameters keep their registration order; a layer whose producer was implicit (the previous
  // layer) names it. InvalidArgument when `order` is not a permutation.
  StatusOr<ModelSpec> withLayerOrder(const std::vector<int>& order) const;
};

// Parses a model JSON document. `origin` names the source in error messages.
StatusOr<ModelSpec> parseModelJson(std::string_view text, const std::string& origin);
// Reads and parses a model file.
StatusOr<ModelSpec> loadModelFile(const std::string& path);

}  // namespace ddpscope::models
