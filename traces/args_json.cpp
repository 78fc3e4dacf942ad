#include "traces/args_json.h"

#include <nlohmann/json.hpp>
#include <variant>

namespace ddpscope::traces {

Args argsFromJson(const nlohmann::json& object) {
  Args out;
  if (!object.is_object()) return out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (v.is_boolean()) {
      out.set(it.key(), int64_t{v.get<bool>() ? 1 : 0});
    } else if (v.is_number_integer()) {
      out.set(it.key(), v.get<int64_t>());
    } else if (v.is_number()) {
      out.set(it.key(), v.get<double>());
    } else if (v.is_string()) {
      out.set(it.key(), v.get<std::string>());
    } else {
      out.set(it.key(), v.dump());
    }
  }
  return out;
}

nlohmann::json argsToJson(const Args& args) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : args) {
    std::visit([&, k = &key](const auto& v) { out[*k] = v; }, value);
  }
  return out;
}

}  // namespace ddpscope::traces
