// The model of a PyTorch profiler (Kineto) trace, read off the trace itself, so that a trace
// recorded with record_shapes=True imports, replays and plans without a model file.
//
// From one profiled step (the last ProfilerStep#N whose backward accumulates gradients):
// - parameters: one per torch::autograd::AccumulateGrad op of the backward, in the order they
//   run (the gradient-ready order DDP's reducer sees), each with the gradient's "Input Dims"
//   (its shape) and "Input type" (its dtype);
// - layers, in forward execution order: the innermost "ddpscope.layer:<module path>" ranges
//   (a module called again in the step is "<path>:2", ..., as the import numbers them) when the
//   job wrapped its modules in them; else the forward's top-level aten ops of a known kind
//   (traces/kineto_kinds.h) whose autograd node runs in the backward, named "<op>.<k>"
//   ("conv2d.0", "linear.3"); a layer's type follows its first op of a known kind other than
//   Add ("Conv2d", "Linear", "BatchNorm2d", ...; "Module" for a range without one); with
//   ranges, a module that
//   runs ops itself outside its children (a residual add, an attention core) gets one more
//   layer, "<path>.ops" of type "Functional", where the first of them runs;
// - which layer owns a parameter: the layer of the forward op whose autograd node (by sequence
//   number) ran last before the parameter's AccumulateGrad (autograd runs a gradient's
//   accumulation as soon as the node producing it finishes); -1 when no node ties it to a layer.
//
// What the trace cannot say: parameter names (the model names them "<layer>.weight", ...) and
// registration order (taken as the layers' forward order: see api/import_request.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "traces/timeline.h"

namespace ddpscope::traces {

// A layer of the model the job trained (models/FORMAT.md), in forward execution order.
struct ImportLayer {
  std::string name;  // module path, "layer1.0.conv1"
  std::string type;  // "Conv2d", "Linear", "ReLU", ...
};

struct TraceModelParam {
  std::vector<int64_t> shape;
  std::string dtype;  // "float32", "bfloat16", "float16" or "float64"
  int layer = -1;     // index into TraceModel::layers; -1: tied to no layer
};

struct TraceModel {
  std::vector<ImportLayer> layers;      // forward execution order
  std::vector<TraceModelParam> params;  // gradient-ready order
  std::string file;                     // the trace it was read from
  int64_t iteration = 0;                // the N of the ProfilerStep#N read
  bool fromRanges = false;              // layers from ddpscope.layer: ranges (else from ops)
};

// Reads the model of one rank's trace (as traces::readChromeTrace read it: host lanes per
// thread with the events' args). Errors (InvalidArgument, naming `path`) say what is missing and
// which profiler option records it: no ProfilerStep#N; no AccumulateGrad op; AccumulateGrad ops
// without "Input Dims" (record_shapes=True); no layer (neither ranges nor forward ops of a known
// kind inside DistributedDataParallel.forward).
StatusOr<TraceModel> readTraceModel(const RankTrack& track, const std::string& path);

// For a model read from a trace's ops (not its ranges): in every profiled step of `track` whose
// forward runs the model's layers (the same ops of a known kind that autograd differentiates, in
// the same order), each such op's start (ns) → its layer; with `everyOp`, also each other
// top-level op of the forward → the layer whose op ran last before it (the first layer for ops
// before any): the host work of a layer's functional ops (attention's matmuls and softmax, views)
// is its. Empty for a model read from ranges.
std::map<int64_t, int> forwardOpLayers(const RankTrack& track, const TraceModel& model,
                                       bool everyOp = false);

}  // namespace ddpscope::traces
