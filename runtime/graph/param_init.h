// The initial parameters and buffers of a model built from a ModelSpec, the same on both
// backends: the CPU model trains on them, the CUDA model uploads them, so a CPU and a CUDA model
// built with one seed start from identical values, bit for bit. Every value depends only on
// (seed, parameter index) — identical on every rank before DDP's broadcast.
//
// PyTorch-like initialisation, by the type of the parameter's first owner (in layer order):
// Linear: U(±1/√in) for weight and bias (kaiming_uniform(a=√5) and the default bias init);
// Conv2d: N(0, √(2/fan_out)) (torchvision ResNet's kaiming_normal, mode fan_out, relu), bias 0;
// Conv1D / Embedding (Hugging Face GPT-2): N(0, 0.02), c_proj weights N(0, 0.02/√(2·n_layer)),
// bias 0; norms: weight 1, bias 0; anything else N(0, 0.02). Buffers: running_var 1, GPT-2's
// causal mask lower-triangular ones, masked_bias −1e4, anything else 0.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

// spec.params in order, named and shaped as the spec, with their initial values (Param::grad
// left empty, gradDefined false). Errors: a parameter that is not float32 (the runtime trains
// float32 only), a layer naming a parameter index out of range.
StatusOr<std::vector<Param>> initialParams(const models::ModelSpec& spec, uint64_t seed);

// spec.buffers in order, named and shaped as the spec, with their initial values.
std::vector<Buffer> initialBuffers(const models::ModelSpec& spec);

}  // namespace ddpscope::runtime
