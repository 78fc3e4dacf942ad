// The setting that names a model, as every front end spells it: "model" (--model, Python's
// model=), whose text models::resolveModel reads (a shorthand, a zoo name or a file).
#pragma once

#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "models/model_spec.h"

namespace ddpscope::api {

// {"model", "M", models::kModelArgumentHelp}.
std::vector<SettingSpec> modelSettingList();
// The model "model" names in `values` (required; errors name --model).
StatusOr<models::ModelSpec> loadModelFromSettings(const SettingValues& values);

}  // namespace ddpscope::api
