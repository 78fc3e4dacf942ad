// The host-side checks and decisions a CPU layer (runtime/cpu) and its CUDA twin
// (runtime/cuda) make identically: input shapes, output shapes, target classes and the loss
// head's row chunks — one piece of code, so their errors read the same. The templates take
// either backend's tensor (runtime::Tensor, cuda::DeviceTensor): anything with shape(), rank(),
// dim(i), numel() and shapeString().
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope::runtime {

// Rows of a [..., width] activation (outShape: the same with `outWidth` last); also accepts
// [N, d1, d2...] with d1·d2·… = width (flattened: outShape [N, outWidth]).
template <typename T>
StatusOr<int64_t> rowsOf(const T& x, int64_t width, std::vector<int64_t>* outShape,
                         int64_t outWidth) {
  if (x.rank() >= 1 && x.shape().back() == width) {
    *outShape = x.shape();
    outShape->back() = outWidth;
    return x.numel() / width;
  }
  if (x.rank() >= 2 && width > 0 && x.numel() == x.dim(0) * width) {
    *outShape = {x.dim(0), outWidth};
    return x.dim(0);
  }
  return invalidArgument("input " + x.shapeString() + " does not end in " + std::to_string(width) +
                         " features");
}

// [..., width] (LayerNorm).
template <typename T>
Status expectLastDim(const T& x, int64_t width) {
  if (x.rank() < 1 || x.shape().back() != width) {
    return invalidArgument("input " + x.shapeString() + " does not end in " +
                           std::to_string(width));
  }
  return Status::ok();
}

// [batch, channels, height, width]; channels <= 0: any.
template <typename T>
Status expectNchw(const T& x, int64_t channels) {
  if (x.rank() != 4 || (channels > 0 && x.dim(1) != channels)) {
    return invalidArgument("input " + x.shapeString() + " is not [batch, " +
                           (channels > 0 ? std::to_string(channels) : std::string("C")) +
                           ", height, width]");
  }
  return Status::ok();
}

// A convolution or pooling output of outHeight × outWidth is not empty; `window`: "kernel" or
// "window" (what the input is smaller than).
template <typename T>
Status expectOutputCells(const T& x, int64_t outHeight, int64_t outWidth, const char* window) {
  if (outHeight <= 0 || outWidth <= 0) {
    return invalidArgument("input " + x.shapeString() + " is smaller than the " + window);
  }
  return Status::ok();
}

// Packed qkv [batch, seq, 3·heads·headDim] (AttentionCore).
template <typename T>
Status expectPackedQkv(const T& qkv, int64_t heads, int64_t headDim) {
  const int64_t width = heads * headDim;
  if (qkv.rank() != 3 || qkv.dim(2) != 3 * width) {
    return invalidArgument("input " + qkv.shapeString() + " is not [batch, seq, " +
                           std::to_string(3 * width) + "]");
  }
  return Status::ok();
}

// Token ids or positions of at least one dimension (Embedding).
template <typename T>
Status expectIds(const T& ids) {
  if (ids.rank() < 1) return invalidArgument("input must have at least one dimension");
  return Status::ok();
}

// Every input of an Add has the first one's shape.
template <typename T>
Status expectSameShapes(std::span<const T* const> inputs) {
  const T& first = *inputs[0];
  for (const T* t : inputs) {
    if (t->shape() != first.shape()) {
      return invalidArgument("inputs differ in shape: " + first.shapeString() + " vs " +
                             t->shapeString());
    }
  }
  return Status::ok();
}

// ---- loss heads (runtime/cpu/loss.h) ------------------------------------------------------

template <typename T>
Status expectMseShapes(const T& output, const T& targets) {
  if (output.numel() != targets.numel()) {
    return invalidArgument("MSE: output " + output.shapeString() + " vs targets " +
                           targets.shapeString());
  }
  return Status::ok();
}

// Logits [rows, classes] (leading dimensions flattened) against `rows` class ids.
template <typename T>
Status expectClassRows(const T& output, const T& targets) {
  const int64_t rows = targets.numel();
  if (rows == 0 || output.numel() % rows != 0) {
    return invalidArgument("cross-entropy: output " + output.shapeString() + " vs targets " +
                           targets.shapeString());
  }
  return Status::ok();
}

// Hidden states [rows, width] (leading dimensions flattened) against `rows` next-token ids.
template <typename T>
Status expectLmRows(const T& output, const T& targets, int64_t width) {
  const int64_t rows = targets.numel();
  if (rows == 0 || output.numel() != rows * width) {
    return invalidArgument("LM loss: hidden states " + output.shapeString() + " vs targets " +
                           targets.shapeString());
  }
  return Status::ok();
}

// A class id stored as a float: an integer in [0, classes).
Status checkTargetClass(float target, int64_t classes);

// Rows of logits the tied LM head computes at once: all `rows` when the logits are stored for
// backward, else as many as fit `chunkFloats` (at least one).
inline int64_t lmChunkRows(int64_t rows, int64_t vocab, bool logitsStored, int64_t chunkFloats) {
  return logitsStored ? rows : std::max<int64_t>(1, chunkFloats / vocab);
}

}  // namespace ddpscope::runtime
