#include "runtime/cpu/trainable_model.h"

#include "runtime/cpu/cpu_model.h"

namespace ddpscope::runtime {

StatusOr<std::unique_ptr<TrainableModel>> buildTrainableModel(const models::ModelSpec& spec,
                                                              const BuildOptions& options) {
  return cpu::buildCpuModel(spec, options);
}

}  // namespace ddpscope::runtime
