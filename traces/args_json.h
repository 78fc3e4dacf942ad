// Args ↔ JSON object: how run metadata written as JSON (DDP settings, workload descriptions)
// enters a trace's "otherData" and comes back out for readers (ddp::readDdpSettingsJson).
//
// argsFromJson appends in the object's iteration order (nlohmann::json sorts keys); JSON booleans
// become int64 1 / 0 (Args holds int64, double, string: trace metadata has always stored flags as
// integers), integers int64, other numbers double, strings strings, anything else (null, arrays,
// objects) its JSON text. argsToJson is the inverse for those three types.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "traces/timeline.h"

namespace ddpscope::traces {

Args argsFromJson(const nlohmann::json& object);
nlohmann::json argsToJson(const Args& args);

}  // namespace ddpscope::traces
