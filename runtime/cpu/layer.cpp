#include "runtime/cpu/layer.h"

#include <variant>
#include <vector>

#include "runtime/cpu/layers_internal.h"

namespace ddpscope::runtime::cpu {

float* Workspace::buffer(int slot, int64_t count) {
  std::vector<float>& b = m_buffers.at(static_cast<size_t>(slot));
  if (static_cast<int64_t>(b.size()) < count) b.resize(static_cast<size_t>(count));
  return b.data();
}

StatusOr<std::unique_ptr<Layer>> makeLayer(const models::LayerSpec& spec,
                                           const LayerBinding& binding) {
  ASSIGN_OR_RETURN(LayerConfig config, parseLayerConfig(spec, binding));
  return std::visit([](const auto& c) { return makeLayerFor(c); }, config);
}

}  // namespace ddpscope::runtime::cpu
