// KernelBench: layer kernel times from a GPU's single-layer benchmark (scripts/gpu_kit/
// kernel_bench.py, format "ddpscope-kernel-bench" version 1), and BenchComputeModel, the
// compute model that times a model's layers with it (`simulate --kernel-bench FILE`).
//
// The benchmark measured, per case (an op family and its shape: a Linear of M tokens, K inputs,
// N outputs; a Conv2d; a BatchNorm2d; ...), the kernel time of its forward and of its backward
// under bf16 autocast with fp32 parameters, as PyTorch runs the GPU kit's models. A query shape
// is predicted from the kNeighbours nearest measured cases of its family and pass (same input
// variant and the family's categorical parameters; log2 distance over the others; a Linear's
// bias is a soft category, distance 1), each scaled by a fitted formula's ratio between the
// query and that case and weighted by 1 / (distance + 0.05)². The formula, per family variant
// and pass, fitted when the benchmark is loaded by non-negative least squares on the relative
// error: floor + c·(GEMM FLOPs rounded up to whole waves of 128×128 tiles on 132 SMs) + c'·bytes
// for Linear, Conv2d and attention, floor + c·elements for the rest (an embedding's backward
// adds its table's elements). docs/validation.md, "Kernel times from single-layer benchmarks",
// measures it; scripts/fit_kernel_bench.py is the same method in Python (its table is what the
// docs show).
//
// A layer maps to the ops the benchmark names through its type and attributes, with the sizes
// the model's FLOPs and bytes give at the run's inputs (models/FORMAT.md: bytes are counted at
// fp32): Linear and Conv1D (M = FLOPs / 2KN), Conv2d (groups 1; output side from FLOPs, input
// side = output × stride), BatchNorm2d, LayerNorm, RMSNorm, GELU, ReLU, Tanh (as ReLU), Add,
// SwiGLU (SiLU × mul), Embedding, MaxPool2d (3×3, stride 2: channels from the layer before) and
// AttentionCore (its sequence from its FLOPs). The input variant follows autocast's dtypes
// through the model: matrix products, convolutions and attention write bf16; the norms and
// embeddings fp32; an add fp32 when either input is; the rest keep their input's. A tensor that
// several layers read costs its gradient sums in backward (benchOpsOfLayers). A layer of
// any other type, or whose ops the benchmark has no case family for, keeps the base model's
// time (the roofline or the cluster's kernel fit).
//
// Errors (InvalidArgument, naming the source and field): not this format or version, a case
// without family, shape or kernel times, files of different GPUs, torch versions or dtypes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/compute/compute_model.h"

namespace ddpscope::sim {

// One op of the benchmark's families with its shape: numeric parameters (m, k, n, bias, ...)
// and the input variant ("" bf16, "fp32", "mixed").
struct BenchOp {
  std::string family;
  std::map<std::string, double> shape;
  std::string x;
  // Backward only, timed as the family's forward: the add autograd runs to sum the gradients
  // of a tensor that several layers read.
  bool gradientSum = false;
};

class KernelBench {
 public:
  static constexpr int kNeighbours = 4;

  // `texts`: (source name, JSON text) of one or more benchmark files of one GPU, torch version
  // and dtype; their cases together.
  static StatusOr<KernelBench> parse(const std::vector<std::pair<std::string, std::string>>& texts);

  // The op's kernel time in µs for pass 0 (forward) or 1 (backward); nullopt when the benchmark
  // has neither a case nor a formula for its family variant and pass.
  std::optional<double> predictUs(const BenchOp& op, int pass) const;
  // The fitted formula alone (what predictUs scales its neighbours by).
  std::optional<double> formulaUs(const BenchOp& op, int pass) const;

  const std::string& device() const { return m_device; }
  const std::string& torch() const { return m_torch; }
  const std::string& dtype() const { return m_dtype; }
  bool autocast() const { return m_autocast; }
  size_t cases() const { return m_cases; }
  const std::string& source() const { return m_source; }

 private:
  struct Case {
    std::vector<double> hard;  // categorical values that must match
    std::vector<double> soft;  // categorical values that may differ at a cost
    std::vector<double> num;   // log2 of the other parameters
    std::map<std::string, double> shape;
    std::string x;
    double us = 0;
  };
  // family variant key ("linear:fp32") and pass -> cases, formula coefficients
  std::map<std::pair<std::string, int>, std::vector<Case>> m_byKey;
  std::map<std::pair<std::string, int>, std::vector<double>> m_formula;
  std::string m_device, m_torch, m_dtype, m_source;
  bool m_autocast = false;
  size_t m_cases = 0;
};

// The benchmark's ops of each layer of `model` at `inputs` (an empty list: the benchmark does
// not cover the layer), under bf16 autocast's dtype flow. A layer output that k > 1 layers read
// gets its gradients summed in backward: k - 1 adds of its size, each in the backward of one of
// the first k - 1 readers in forward order (autograd adds a gradient to the ones already there
// in the node that delivers it; backward runs the readers last to first).
std::vector<std::vector<BenchOp>> benchOpsOfLayers(const models::ModelSpec& model,
                                                   const models::ModelInputs& inputs);

// Times the layers the benchmark covers from it, the rest (and copies, the optimizer, the
// graph traversal) with `base`.
class BenchComputeModel final : public ComputeModel {
 public:
  BenchComputeModel(std::shared_ptr<const KernelBench> bench, std::unique_ptr<ComputeModel> base);

  std::vector<LayerTimes> layerTimes(const models::ModelSpec& model,
                                     const models::ModelInputs& inputs) const override;
  Nanos copyTime(int64_t bytes) const override { return m_base->copyTime(bytes); }
  Nanos optimizerTime(int64_t paramBytes) const override {
    return m_base->optimizerTime(paramBytes);
  }
  Nanos graphTraversalTime(int64_t numGraphNodes) const override {
    return m_base->graphTraversalTime(numGraphNodes);
  }
  std::string describe() const override;
  std::string optimizer() const override { return m_base->optimizer(); }
  std::vector<std::string> layerTimedBy(const models::ModelSpec& model,
                                        const models::ModelInputs& inputs) const override;

 private:
  std::shared_ptr<const KernelBench> m_bench;
  std::unique_ptr<ComputeModel> m_base;
};

}  // namespace ddpscope::sim
