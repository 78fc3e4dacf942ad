#include "base/json_errors.h"

#include <nlohmann/json.hpp>

namespace ddpscope {

namespace {
constexpr size_t kMaxShownValueChars = 60;
}  // namespace

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

}  // namespace ddpscope
