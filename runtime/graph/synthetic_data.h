// SyntheticData: the seeded data set a model trains on (the CPU and the CUDA model alike), derived
// from the model's layers.
//
// - Regression (first layer Linear, e.g. mlp-tiny/mlp-wide): x ~ N(0, 1)^in, target = x·A/√in
//   for a fixed random "teacher" A [in, out] ~ N(0, 1) drawn from dataSeed. Loss: MSE (mean).
// - Classification (first layer Conv2d, e.g. resnet18): images ~ N(0, 1) [C, S, S] with
//   S = inputs.imageSize, labels uniform in [0, classes) with classes = the last Linear's
//   out_features. Loss: softmax cross-entropy (mean).
// - Language modelling (first layer Embedding, e.g. GPT-2): T + 1 uniform token ids per sample;
//   inputs are the first T, targets the next token at each position (the last T). Loss:
//   softmax cross-entropy (mean over batch·T) of the hidden states against the first
//   Embedding's weight (the tied lm_head of GPT2LMHeadModel).
//
// Every value depends only on (dataSeed, sample index): shards of a batch concatenate to the
// batch exactly, whichever rank makes them.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "runtime/graph/trainable_model.h"

namespace ddpscope::runtime {

enum class TaskKind { kRegression, kClassification, kLanguageModel };

struct TaskInfo {
  TaskKind kind = TaskKind::kRegression;
  int64_t inFeatures = 0;   // regression: input width
  int64_t outFeatures = 0;  // regression: target width; classification: classes
  int64_t channels = 0;     // classification: image channels
  int64_t imageSize = 0;    // classification: square image side (pixels)
  int64_t vocab = 0;        // language model: vocabulary size
  int64_t seqLen = 0;       // language model: tokens per sample
  int headParam = -1;       // language model: parameter index of the tied output embedding
};

// Derives the task from the spec's first and last layers; `inputs` overrides the spec's
// default seqLen / imageSize where non-zero.
StatusOr<TaskInfo> deriveTask(const models::ModelSpec& spec, const models::ModelInputs& inputs);

// A language model's sequence length against its position embeddings: every Embedding but the
// first (the token embedding) must have at least task.seqLen rows ("sequence length 4096
// exceeds wpe's 1024 positions"). Other tasks always fit.
Status checkSequenceFits(const models::ModelSpec& spec, const TaskInfo& task);

class SyntheticData {
 public:
  static constexpr int64_t kDatasetSize = 4096;

  explicit SyntheticData(TaskInfo task) : m_task(task) {}
  const TaskInfo& task() const { return m_task; }
  Batch makeBatch(std::span<const int64_t> sampleIndices, uint64_t dataSeed) const;

 private:
  const std::vector<float>& teacher(uint64_t dataSeed) const;

  TaskInfo m_task;
  mutable std::mutex m_teacherMutex;
  mutable uint64_t m_teacherSeed = 0;
  mutable std::vector<float> m_teacher;  // [in, out], for m_teacherSeed
};

}  // namespace ddpscope::runtime
