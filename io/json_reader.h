// Shared pieces of the JSON loaders' error messages (models/, sim/cost/, ...): every error
// names the file, the JSON path and what was expected, and shows what was found:
//   "model.json: parameters[2].dtype: expected one of float32, ...; got \"float33\"".
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ddpscope {

// "path.key" (just "key" at the root).
std::string jsonKeyPath(const std::string& path, std::string_view key);
// "path[index]".
std::string jsonIndexPath(const std::string& path, size_t index);
// The value as an error shows it (abbreviated past 60 characters); "nothing (the field is
// missing)" for null.
std::string describeJsonValue(const nlohmann::json* value);
// The member `key` of an object, or null.
const nlohmann::json* findJsonMember(const nlohmann::json& object, std::string_view key);
// Parses a whole document that must be a JSON object; errors name `origin` (the parser's byte
// offset for invalid JSON). Callers include <nlohmann/json.hpp>.
StatusOr<nlohmann::json> parseJsonObject(std::string_view text, const std::string& origin);
// InvalidArgument "origin: path: expected <expected>; got <describeJsonValue(got)>".
Status jsonFieldError(const std::string& origin, const std::string& path,
                      const std::string& expected, const nlohmann::json* got);

}  // namespace ddpscope
