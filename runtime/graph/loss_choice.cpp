#include "runtime/graph/loss_choice.h"

namespace ddpscope::runtime {

LossChoice lossFor(const TaskInfo& task, std::span<Param> params) {
  switch (task.kind) {
    case TaskKind::kRegression:
      return {LossKind::kMse, nullptr};
    case TaskKind::kClassification:
      return {LossKind::kCrossEntropy, nullptr};
    case TaskKind::kLanguageModel:
      return {LossKind::kTiedLmCrossEntropy, &params[static_cast<size_t>(task.headParam)]};
  }
  return {};
}

}  // namespace ddpscope::runtime
