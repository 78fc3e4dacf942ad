// What the import knows of PyTorch's ops by name: the layer kind a forward aten op computes, the
// kind whose backward an autograd node computes, and the kind a model layer type shows up as. The
// import matches a model's layers to a trace's ops by these kinds (traces/kineto_import.h,
// KinetoImportOptions::layers), and the model read off a trace (traces/kineto_model.h) names its
// layers by them.
#pragma once

#include <string_view>

namespace ddpscope::traces {

// The range a job (ddpscope.torch's recorder, the GPU kit's jobs) wraps each module call in:
// "ddpscope.layer:<module path>".
inline constexpr std::string_view kLayerRangePrefix = "ddpscope.layer:";
// The host range of one autograd node: "autograd::engine::evaluate_function: <node>".
inline constexpr std::string_view kAutogradNodePrefix = "autograd::engine::evaluate_function: ";

// The layer kind a forward aten op computes ("Linear", "Conv", "BatchNorm", "ReLU", "Add", ...;
// "" for views, allocations and ops of no known kind).
std::string_view forwardOpKind(std::string_view name);
// The layer kind whose backward an autograd node computes ("" for AccumulateGrad, TBackward0,
// views, ...).
std::string_view backwardNodeKind(std::string_view name);
// The op kind a model layer type shows up as ("" when no op kind is known for it).
std::string_view layerKind(std::string_view type);

}  // namespace ddpscope::traces
