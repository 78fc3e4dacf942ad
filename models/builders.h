// Model builders: ModelSpecs made in code rather than read from the zoo — GPT-2 at any size,
// MLPs of any shape, and an MLP with a conditionally used branch (find_unused_parameters) —
// plus a shorthand syntax for them on the command line.
//
// The specs follow the zoo generator (models/zoo/gen_zoo.py) exactly: the same parameter
// names and order, layer names, types, attrs, inputs, grad-ready orders and cost polynomials,
// so makeGpt2Spec(Gpt2Config{}) equals zoo:gpt2-small and makeMlpSpec of mlp-tiny's shape equals
// zoo:mlp-tiny.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"

namespace ddpscope::models {

// Hugging Face GPT2Model (transformers 4.2x naming, no lm_head). Defaults: the gpt2 config.
struct Gpt2Config {
  std::string name = "gpt2-small";
  int64_t nLayer = 12;
  int64_t nEmbd = 768;
  int64_t nHead = 12;
  int64_t vocab = 50257;
  int64_t nPositions = 1024;
  int64_t seqLen = 1024;  // default input: tokens per sample
  int64_t batch = 8;      // default input: samples per rank per step
};
ModelSpec makeGpt2Spec(const Gpt2Config& config);

// nn.Sequential(Linear(in, hidden), ReLU(), ..., Linear(hidden, out)) with `depth` Linear
// layers (depth 1: a single Linear(in, out)). Layer and parameter names "0", "1.weight", ...
struct MlpConfig {
  std::string name = "mlp";
  int64_t in = 1024;
  int64_t hidden = 1024;
  int64_t depth = 8;
  int64_t out = 1024;
  int64_t batch = 64;
};
ModelSpec makeMlpSpec(const MlpConfig& config);

// fc1 → relu → [branch: Linear(hidden, hidden), used per `use`] → add(relu, branch) → fc2.
// Registration order fc1, branch, fc2. When the branch does not run, the Add passes relu's
// output through and branch.* are unused (find_unused_parameters must handle them).
struct BranchyMlpConfig {
  std::string name = "mlp-branch";
  int64_t in = 16;
  int64_t hidden = 32;
  int64_t out = 4;
  int64_t batch = 16;
  UsePattern use{.period = 2, .phase = 0, .ranks = {}};  // default: odd iterations 1, 3, ...
};
ModelSpec makeBranchyMlpSpec(const BranchyMlpConfig& config);

// Parses "gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32[,positions=N][,batch=N]",
// "mlp:in=16,hidden=64,depth=3,out=4[,batch=N]" or
// "mlp-branch:in=16,hidden=32,out=4[,period=2][,phase=0][,ranks=0+1][,batch=N]".
// Omitted keys take the struct defaults above. Errors name the offending key and the allowed
// ones.
StatusOr<ModelSpec> parseModelShorthand(std::string_view text);
// True when `text` looks like a shorthand (has a known "kind:" prefix or is a bare kind).
bool isModelShorthand(std::string_view text);

}  // namespace ddpscope::models
