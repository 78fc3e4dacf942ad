// The path-aware JSON reader every loader uses (models/, sim/cost/ clusters, DDP settings).
//
// Every error names the origin (a file path, "zoo:NAME", "cluster:NAME"), the JSON path of the
// offending value and what was expected, and shows what was found:
//   "model.json: parameters[2].dtype: expected one of float32, ...; got \"float33\"".
// nlohmann::json exceptions never leave io/: parseJsonObject catches parse errors.
//
// Free functions build paths and messages; JsonReader binds them to one origin and reads typed
// fields (required or with a fallback when missing) with range checks. Callers include
// <nlohmann/json.hpp> themselves (this header only needs json_fwd.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <optional>
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
// offset for invalid JSON).
StatusOr<nlohmann::json> parseJsonObject(std::string_view text, const std::string& origin);
// "a, b, c": the allowed values of a field, as messages list them.
std::string joinChoices(std::initializer_list<std::string_view> choices);
// InvalidArgument "origin: path: expected <expected>; got <describeJsonValue(got)>".
Status jsonFieldError(const std::string& origin, const std::string& path,
                      const std::string& expected, const nlohmann::json* got);

namespace io {

// Typed, range-checked reads of JSON fields, every error naming origin + path (see above).
// `object` arguments are JSON objects, `path` the JSON path of that object ("" at the root).
// A `fallback` is returned when the key is missing; nullopt makes the field required.
class JsonReader {
 public:
  using Json = nlohmann::json;

  explicit JsonReader(std::string origin) : m_origin(std::move(origin)) {}
  const std::string& origin() const { return m_origin; }

  Status error(const std::string& path, const std::string& expected, const Json* got) const;
  static const Json* find(const Json& object, std::string_view key) {
    return findJsonMember(object, key);
  }
  // Unknown keys are errors (they are usually typos); the message lists the allowed ones.
  Status checkKeys(const Json& object, const std::string& path,
                   std::initializer_list<std::string_view> allowed) const;
  // The member object `key`; null when missing and not required.
  StatusOr<const Json*> object(const Json& parent, const std::string& path, std::string_view key,
                               bool required) const;
  StatusOr<std::string> requiredString(const Json& object, const std::string& path,
                                       std::string_view key) const;
  // An optional string (any, possibly empty); `fallback` when missing.
  StatusOr<std::string> string(const Json& object, const std::string& path, std::string_view key,
                               std::string fallback) const;
  // A string from a fixed set.
  StatusOr<std::string> oneOf(const Json& object, const std::string& path, std::string_view key,
                              std::initializer_list<std::string_view> choices,
                              std::optional<std::string> fallback) const;
  // A finite number in [minValue, maxValue]; `expected` words the range for the message.
  StatusOr<double> number(const Json& object, const std::string& path, std::string_view key,
                          double minValue, double maxValue, std::optional<double> fallback,
                          const std::string& expected) const;
  // An integer in [minValue, maxValue] (a member, or a value at `path`).
  StatusOr<int64_t> integer(const Json& object, const std::string& path, std::string_view key,
                            int64_t minValue, int64_t maxValue, std::optional<int64_t> fallback,
                            const std::string& expected) const;
  StatusOr<int64_t> integerValue(const Json& value, const std::string& path, int64_t minValue,
                                 int64_t maxValue, const std::string& expected) const;
  StatusOr<bool> boolean(const Json& object, const std::string& path, std::string_view key,
                         std::optional<bool> fallback) const;

 private:
  std::string m_origin;
};

}  // namespace io
}  // namespace ddpscope
