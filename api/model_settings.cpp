#include "api/model_settings.h"

#include <string>

#include "models/model_resolver.h"

namespace ddpscope::api {

std::vector<SettingSpec> modelSettingList() {
  return {{"model", "M", std::string(models::kModelArgumentHelp)}};
}

StatusOr<models::ModelSpec> loadModelFromSettings(const SettingValues& values) {
  ASSIGN_OR_RETURN(const std::string text, requiredNameOrFile(values, "model"));
  return models::resolveModel(text);
}

}  // namespace ddpscope::api
