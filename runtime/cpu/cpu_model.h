// CpuModel: the TrainableModel (runtime/graph/trainable_model.h) for the CPU — a graph of Layers
// built from a ModelSpec, a LossHead on the last layer, SyntheticData for its inputs and the
// initial values of runtime/graph/param_init.h.
//
// Execution graph. Layers run in spec order (forward execution order); a layer's inputs are
// the outputs of its `inputs` producers (default: the previous layer; "@input": the batch).
// Conditional layers (LayerSpec::use): a layer not used in (iteration, rank) produces NO
// output. An Add sums only the inputs that were produced — so a skipped branch feeding a
// residual Add contributes nothing (the Add passes the other input through); any other layer
// with a missing input is skipped as well. The model's output is the last layer's; the loss is
// applied to it. After forward, the layers that can reach the loss through produced inputs are
// "reached" (the traversal DDP's find_unused_parameters does from the outputs); parameters
// owned by no reached layer (nor by the loss head) are ForwardResult::unusedParams.
//
// Backward visits reached layers in reverse execution order. A producer feeding several
// consumers receives the sum of their gradients (first writer overwrites, later ones add).
// After a layer's backward, onGradReady(p) fires for each p in its gradReadyOrder whose
// earliest-executed reached owner is this layer (a shared weight — GPT-2's tied wte, also used
// by the loss head — is ready only when its last contribution is in), matching
// ModelSpec::gradReadyOrder() when every layer runs.
//
// Dropout (and attention dropout) runs DISABLED (identity): PyTorch draws an independent mask
// per rank and per call, so a DDP run with dropout cannot equal the single-process run; the
// equivalence the runtime demonstrates needs p = 0. BatchNorm always runs in training mode.
//
// Memory: every layer's output and output-gradient tensor, and the layers' saved state, are
// members reused across iterations; the first step allocates, later ones (same batch) do not.
#pragma once

#include <memory>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime::cpu {

StatusOr<std::unique_ptr<TrainableModel>> buildCpuModel(const models::ModelSpec& spec,
                                                        const BuildOptions& options);

}  // namespace ddpscope::runtime::cpu

namespace ddpscope::runtime {

// The default trainable model: the CPU model (buildCpuModel). An unsupported layer type gives
// "model gpt2-xl: layer h.0.attn.core: unsupported layer type 'X' (supported: ...)".
StatusOr<std::unique_ptr<TrainableModel>> buildTrainableModel(const models::ModelSpec& spec,
                                                              const BuildOptions& options);

}  // namespace ddpscope::runtime
