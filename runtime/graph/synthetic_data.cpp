#include "runtime/graph/synthetic_data.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/graph/layer_config.h"
#include "runtime/graph/random.h"

namespace ddpscope::runtime {

namespace {

// Stream ids keep the inputs, targets and teacher independent of each other.
constexpr uint64_t kInputStream = 0x1;
constexpr uint64_t kTargetStream = 0x2;
constexpr uint64_t kTeacherStream = 0x7EAC4E2;

// "model M: <rule>; the last layer L is T" unless the last layer is a Linear.
Status expectLinearLast(const models::ModelSpec& spec, const std::string& rule) {
  const models::LayerSpec& last = spec.layers.back();
  if (last.type == "Linear") return Status::ok();
  return invalidArgument("model " + spec.name + ": " + rule + "; the last layer " + last.name +
                         " is " + last.type);
}

}  // namespace

StatusOr<TaskInfo> deriveTask(const models::ModelSpec& spec, const models::ModelInputs& inputs) {
  if (spec.layers.empty()) {
    return invalidArgument("model " + spec.name + " has no layers; the runtime needs them");
  }
  const models::LayerSpec& first = spec.layers.front();
  const models::LayerSpec& last = spec.layers.back();
  TaskInfo task;
  if (first.type == "Linear") {
    task.kind = TaskKind::kRegression;
    task.inFeatures = attrOr(first, "in_features", 0);
    RETURN_IF_ERROR(expectLinearLast(spec, "a regression model must end in a Linear layer"));
    task.outFeatures = attrOr(last, "out_features", 0);
  } else if (first.type == "Conv2d") {
    task.kind = TaskKind::kClassification;
    task.channels = attrOr(first, "in_channels", 0);
    task.imageSize = inputs.imageSize > 0 ? inputs.imageSize : spec.defaultInputs.imageSize;
    RETURN_IF_ERROR(expectLinearLast(spec, "an image model must end in a Linear classifier"));
    task.outFeatures = attrOr(last, "out_features", 0);
    if (task.imageSize <= 0) return invalidArgument("model " + spec.name + ": no image size");
  } else if (first.type == "Embedding") {
    task.kind = TaskKind::kLanguageModel;
    task.vocab = attrOr(first, "num_embeddings", 0);
    task.seqLen = inputs.seqLen > 0 ? inputs.seqLen : spec.defaultInputs.seqLen;
    if (first.params.size() != 1) {
      return invalidArgument("model " + spec.name + ": embedding " + first.name +
                             " must own exactly one parameter");
    }
    task.headParam = first.params[0];
    if (task.seqLen <= 0) return invalidArgument("model " + spec.name + ": no sequence length");
  } else {
    return invalidArgument("model " + spec.name +
                           ": cannot derive synthetic data for a model "
                           "whose first layer is " +
                           first.type + " (supported: Linear, Conv2d, Embedding)");
  }
  return task;
}

Status checkSequenceFits(const models::ModelSpec& spec, const TaskInfo& task) {
  if (task.kind != TaskKind::kLanguageModel) return Status::ok();
  for (const models::LayerSpec& ls : spec.layers) {
    if (ls.type == "Embedding" && (attrOr(ls, "num_embeddings", 0) < task.seqLen) &&
        ls.name != spec.layers.front().name) {
      return invalidArgument("sequence length " + std::to_string(task.seqLen) + " exceeds " +
                             ls.name + "'s " + std::to_string(attrOr(ls, "num_embeddings", 0)) +
                             " positions");
    }
  }
  return Status::ok();
}

const std::vector<float>& SyntheticData::teacher(uint64_t dataSeed) const {
  // Caller holds m_teacherMutex.
  const size_t size = static_cast<size_t>(m_task.inFeatures * m_task.outFeatures);
  if (m_teacher.size() != size || m_teacherSeed != dataSeed) {
    m_teacher.resize(size);
    Rng rng(mixKeys(dataSeed, kTeacherStream));
    for (float& v : m_teacher) v = static_cast<float>(rng.normal());
    m_teacherSeed = dataSeed;
  }
  return m_teacher;
}

Batch SyntheticData::makeBatch(std::span<const int64_t> sampleIndices, uint64_t dataSeed) const {
  Batch batch;
  batch.sampleIndices.assign(sampleIndices.begin(), sampleIndices.end());
  const int64_t n = static_cast<int64_t>(sampleIndices.size());
  switch (m_task.kind) {
    case TaskKind::kRegression: {
      const int64_t in = m_task.inFeatures, out = m_task.outFeatures;
      batch.inputs = Tensor({n, in});
      batch.targets = Tensor({n, out});
      for (int64_t s = 0; s < n; ++s) {
        Rng rng(mixKeys(dataSeed, static_cast<uint64_t>(sampleIndices[static_cast<size_t>(s)]),
                        kInputStream));
        for (int64_t j = 0; j < in; ++j)
          batch.inputs[s * in + j] = static_cast<float>(rng.normal());
      }
      std::lock_guard<std::mutex> lock(m_teacherMutex);
      const std::vector<float>& a = teacher(dataSeed);
      // One sample at a time, each output summed over the inputs in index order: a GEMM over
      // the whole batch picks its blocking (and so its summation order) by the number of rows
      // and the CPU (AVX-512 OpenBLAS kernels differ in the last bit between 2 and 6 rows),
      // so a rank's shard would not equal its slice of the full batch.
      const float scale = 1.0f / std::sqrt(static_cast<float>(in));
      std::vector<float> row(static_cast<size_t>(out));
      for (int64_t s = 0; s < n; ++s) {
        std::fill(row.begin(), row.end(), 0.0f);
        const float* x = batch.inputs.data() + s * in;
        for (int64_t j = 0; j < in; ++j) {
          const float xj = x[j];
          const float* aj = a.data() + j * out;
          for (int64_t o = 0; o < out; ++o) row[static_cast<size_t>(o)] += xj * aj[o];
        }
        float* y = batch.targets.data() + s * out;
        for (int64_t o = 0; o < out; ++o) y[o] = scale * row[static_cast<size_t>(o)];
      }
      break;
    }
    case TaskKind::kClassification: {
      const int64_t c = m_task.channels, s = m_task.imageSize, per = c * s * s;
      batch.inputs = Tensor({n, c, s, s});
      batch.targets = Tensor({n});
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t index = static_cast<uint64_t>(sampleIndices[static_cast<size_t>(i)]);
        Rng rng(mixKeys(dataSeed, index, kInputStream));
        for (int64_t j = 0; j < per; ++j)
          batch.inputs[i * per + j] = static_cast<float>(rng.normal());
        Rng label(mixKeys(dataSeed, index, kTargetStream));
        batch.targets[i] = static_cast<float>(label.below(m_task.outFeatures));
      }
      break;
    }
    case TaskKind::kLanguageModel: {
      const int64_t t = m_task.seqLen;
      batch.inputs = Tensor({n, t});
      batch.targets = Tensor({n, t});
      for (int64_t i = 0; i < n; ++i) {
        Rng rng(mixKeys(dataSeed, static_cast<uint64_t>(sampleIndices[static_cast<size_t>(i)]),
                        kInputStream));
        float previous = static_cast<float>(rng.below(m_task.vocab));
        for (int64_t j = 0; j < t; ++j) {
          float next = static_cast<float>(rng.below(m_task.vocab));
          batch.inputs[i * t + j] = previous;
          batch.targets[i * t + j] = next;
          previous = next;
        }
      }
      break;
    }
  }
  return batch;
}

}  // namespace ddpscope::runtime
