#include "traces/kineto_kinds.h"

#include <map>

namespace ddpscope::traces {

std::string_view forwardOpKind(std::string_view name) {
  if (!name.starts_with("aten::")) return "";
  const std::string_view op = name.substr(6);
  static const std::map<std::string_view, std::string_view> kKinds = {
      {"linear", "Linear"},
      {"addmm", "Linear"},
      {"conv1d", "Conv"},
      {"conv2d", "Conv"},
      {"convolution", "Conv"},
      {"_convolution", "Conv"},
      {"batch_norm", "BatchNorm"},
      {"layer_norm", "LayerNorm"},
      {"group_norm", "GroupNorm"},
      {"embedding", "Embedding"},
      {"relu", "ReLU"},
      {"relu_", "ReLU"},
      {"hardtanh", "ReLU6"},
      {"hardtanh_", "ReLU6"},
      {"gelu", "GELU"},
      {"tanh", "Tanh"},
      {"sigmoid", "Sigmoid"},
      {"silu", "SiLU"},
      {"max_pool2d", "MaxPool2d"},
      {"adaptive_avg_pool2d", "AdaptiveAvgPool2d"},
      {"dropout", "Dropout"},
      {"add", "Add"},
      {"add_", "Add"},
  };
  auto it = kKinds.find(op);
  return it == kKinds.end() ? std::string_view() : it->second;
}

std::string_view backwardNodeKind(std::string_view name) {
  static const std::map<std::string_view, std::string_view> kKinds = {
      {"AddmmBackward0", "Linear"},
      {"LinearBackward0", "Linear"},
      {"ConvolutionBackward0", "Conv"},
      {"NativeBatchNormBackward0", "BatchNorm"},
      {"CudnnBatchNormBackward0", "BatchNorm"},
      {"NativeLayerNormBackward0", "LayerNorm"},
      {"NativeGroupNormBackward0", "GroupNorm"},
      {"EmbeddingBackward0", "Embedding"},
      {"ReluBackward0", "ReLU"},
      {"HardtanhBackward0", "ReLU6"},
      {"GeluBackward0", "GELU"},
      {"TanhBackward0", "Tanh"},
      {"SigmoidBackward0", "Sigmoid"},
      {"SiluBackward0", "SiLU"},
      {"MaxPool2DWithIndicesBackward0", "MaxPool2d"},
      {"AdaptiveAvgPool2DBackward0", "AdaptiveAvgPool2d"},
      {"MeanBackward1", "AdaptiveAvgPool2d"},
      {"NativeDropoutBackward0", "Dropout"},
      {"AddBackward0", "Add"},
  };
  auto it = kKinds.find(name);
  return it == kKinds.end() ? std::string_view() : it->second;
}

std::string_view layerKind(std::string_view type) {
  if (type == "Linear" || type == "Conv1D" || type == "NonDynamicallyQuantizableLinear") {
    return "Linear";  // Hugging Face Conv1D computes addmm
  }
  if (type.starts_with("Conv")) return "Conv";
  if (type.starts_with("BatchNorm") || type == "SyncBatchNorm") return "BatchNorm";
  for (std::string_view k :
       {"LayerNorm", "GroupNorm", "Embedding", "ReLU6", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU",
        "MaxPool2d", "AdaptiveAvgPool2d", "Dropout", "Add"}) {
    if (type == k) return k;
  }
  return "";
}

}  // namespace ddpscope::traces
