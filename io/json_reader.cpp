#include "io/json_reader.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace ddpscope {

namespace {
constexpr size_t kMaxShownValueChars = 60;
}  // namespace

std::string joinChoices(std::initializer_list<std::string_view> choices) {
  std::string out;
  for (std::string_view c : choices) {
    if (!out.empty()) out += ", ";
    out += c;
  }
  return out;
}

std::string jsonKeyPath(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string jsonIndexPath(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string describeJsonValue(const nlohmann::json* value) {
  using Json = nlohmann::json;
  if (value == nullptr) return "nothing (the field is missing)";
  std::string text = value->dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxShownValueChars) text = text.substr(0, kMaxShownValueChars) + "...";
  switch (value->type()) {
    case Json::value_t::object:
      return "an object " + text;
    case Json::value_t::array:
      return "an array " + text;
    default:
      return text;
  }
}

const nlohmann::json* findJsonMember(const nlohmann::json& object, std::string_view key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

StatusOr<nlohmann::json> parseJsonObject(std::string_view text, const std::string& origin) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return invalidArgument(origin + ": (document): expected valid JSON; parse error at byte " +
                           std::to_string(e.byte) + ": " + e.what());
  }
  if (!root.is_object()) return jsonFieldError(origin, "(root)", "a JSON object", &root);
  return root;
}

Status jsonFieldError(const std::string& origin, const std::string& path,
                      const std::string& expected, const nlohmann::json* got) {
  return invalidArgument(origin + ": " + path + ": expected " + expected + "; got " +
                         describeJsonValue(got));
}

namespace io {

Status JsonReader::error(const std::string& path, const std::string& expected,
                         const Json* got) const {
  return jsonFieldError(m_origin, path, expected, got);
}

Status JsonReader::checkKeys(const Json& object, const std::string& path,
                             std::initializer_list<std::string_view> allowed) const {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool known = false;
    for (std::string_view a : allowed) known = known || it.key() == a;
    if (!known) {
      return invalidArgument(m_origin + ": " + jsonKeyPath(path, it.key()) +
                             ": unknown field; expected one of " + joinChoices(allowed));
    }
  }
  return Status::ok();
}

StatusOr<const JsonReader::Json*> JsonReader::object(const Json& parent, const std::string& path,
                                                     std::string_view key, bool required) const {
  const Json* value = find(parent, key);
  if (value == nullptr && !required) return value;
  if (value == nullptr || !value->is_object()) {
    return error(jsonKeyPath(path, key), "an object", value);
  }
  return value;
}

StatusOr<std::string> JsonReader::requiredString(const Json& object, const std::string& path,
                                                 std::string_view key) const {
  const Json* value = find(object, key);
  if (value == nullptr || !value->is_string() || value->get_ref<const std::string&>().empty()) {
    return error(jsonKeyPath(path, key), "a non-empty string", value);
  }
  return value->get<std::string>();
}

StatusOr<std::string> JsonReader::string(const Json& object, const std::string& path,
                                         std::string_view key, std::string fallback) const {
  const Json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) return error(jsonKeyPath(path, key), "a string", value);
  return value->get<std::string>();
}

StatusOr<std::string> JsonReader::oneOf(const Json& object, const std::string& path,
                                        std::string_view key,
                                        std::initializer_list<std::string_view> choices,
                                        std::optional<std::string> fallback) const {
  const Json* value = find(object, key);
  if (value == nullptr && fallback) return *fallback;
  const std::string expected = "one of " + joinChoices(choices);
  if (value == nullptr || !value->is_string()) {
    return error(jsonKeyPath(path, key), expected, value);
  }
  const auto& text = value->get_ref<const std::string&>();
  for (std::string_view c : choices) {
    if (text == c) return text;
  }
  return error(jsonKeyPath(path, key), expected, value);
}

StatusOr<double> JsonReader::number(const Json& object, const std::string& path,
                                    std::string_view key, double minValue, double maxValue,
                                    std::optional<double> fallback,
                                    const std::string& expected) const {
  const Json* value = find(object, key);
  if (value == nullptr && fallback) return *fallback;
  if (value == nullptr || !value->is_number()) {
    return error(jsonKeyPath(path, key), expected, value);
  }
  const double v = value->get<double>();
  if (!std::isfinite(v) || v < minValue || v > maxValue) {
    return error(jsonKeyPath(path, key), expected, value);
  }
  return v;
}

StatusOr<int64_t> JsonReader::integer(const Json& object, const std::string& path,
                                      std::string_view key, int64_t minValue, int64_t maxValue,
                                      std::optional<int64_t> fallback,
                                      const std::string& expected) const {
  const Json* value = find(object, key);
  if (value == nullptr && fallback) return *fallback;
  if (value == nullptr) return error(jsonKeyPath(path, key), expected, value);
  return integerValue(*value, jsonKeyPath(path, key), minValue, maxValue, expected);
}

StatusOr<int64_t> JsonReader::integerValue(const Json& value, const std::string& path,
                                           int64_t minValue, int64_t maxValue,
                                           const std::string& expected) const {
  if (!value.is_number_integer()) return error(path, expected, &value);
  if (value.is_number_unsigned() &&
      value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return error(path, expected, &value);
  }
  const int64_t v = value.get<int64_t>();
  if (v < minValue || v > maxValue) return error(path, expected, &value);
  return v;
}

StatusOr<bool> JsonReader::boolean(const Json& object, const std::string& path,
                                   std::string_view key, std::optional<bool> fallback) const {
  const Json* value = find(object, key);
  if (value == nullptr && fallback) return *fallback;
  if (value == nullptr || !value->is_boolean()) {
    return error(jsonKeyPath(path, key), "true or false", value);
  }
  return value->get<bool>();
}

}  // namespace io
}  // namespace ddpscope
