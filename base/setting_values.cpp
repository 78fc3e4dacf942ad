#include "base/setting_values.h"

#include <filesystem>

#include "base/strings.h"

namespace ddpscope {

std::optional<std::string> SettingValues::value(const std::string& name) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return std::nullopt;
  return it->second;
}

StatusOr<double> SettingValues::positiveDouble(const std::string& name, double fallback) const {
  auto text = value(name);
  if (!text) return fallback;
  auto parsed = parseDouble(*text);
  if (!parsed || *parsed <= 0) {
    return invalidArgument("--" + name + ": expected a positive number, got '" + *text + "'");
  }
  return *parsed;
}

StatusOr<int64_t> SettingValues::positiveInt(const std::string& name, int64_t fallback) const {
  auto text = value(name);
  if (!text) return fallback;
  auto parsed = parseInt64(*text);
  if (!parsed || *parsed <= 0) {
    return invalidArgument("--" + name + ": expected a positive integer, got '" + *text + "'");
  }
  return *parsed;
}

StatusOr<double> SettingValues::nonNegativeDouble(const std::string& name, double fallback) const {
  auto text = value(name);
  if (!text) return fallback;
  auto parsed = parseDouble(*text);
  if (!parsed || *parsed < 0) {
    return invalidArgument("--" + name + ": expected a non-negative number, got '" + *text + "'");
  }
  return *parsed;
}

StatusOr<int64_t> SettingValues::nonNegativeInt(const std::string& name, int64_t fallback) const {
  auto text = value(name);
  if (!text) return fallback;
  auto parsed = parseInt64(*text);
  if (!parsed || *parsed < 0) {
    return invalidArgument("--" + name + ": expected a non-negative integer, got '" + *text + "'");
  }
  return *parsed;
}

bool looksLikeFile(const std::string& text) {
  std::error_code ec;
  return text.find('/') != std::string::npos || text.ends_with(".json") ||
         std::filesystem::is_regular_file(text, ec);
}

StatusOr<std::string> requiredNameOrFile(const SettingValues& values, const std::string& name) {
  std::optional<std::string> text = values.value(name);
  if (!text || text->empty()) return invalidArgument("expected --" + name + " NAME|FILE");
  return *text;
}

StatusOr<std::vector<double>> parsePositiveList(const std::string& text, const std::string& what) {
  std::vector<double> out;
  for (const std::string& part : splitString(text, ',')) {
    auto v = parseDouble(part);
    if (!v || *v <= 0) {
      return invalidArgument(what + ": expected positive numbers separated by commas, got '" +
                             part + "' in '" + text + "'");
    }
    out.push_back(*v);
  }
  return out;
}

StatusOr<std::vector<int>> parsePositiveIntList(const std::string& text, const std::string& what) {
  std::vector<int> out;
  for (const std::string& part : splitString(text, ',')) {
    auto v = parseInt64(part);
    if (!v || *v <= 0 || *v > (1 << 24)) {
      return invalidArgument(what + ": expected positive integers separated by commas, got '" +
                             part + "' in '" + text + "'");
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

Status checkSettingNames(const SettingValues& values, const std::vector<SettingSpec>& specs,
                         const std::string& hint) {
  for (const auto& [name, value] : values.values()) {
    bool known = false;
    for (const SettingSpec& spec : specs) known = known || spec.name == name;
    if (!known) return invalidArgument("unknown flag --" + name + hint);
  }
  return Status::ok();
}

}  // namespace ddpscope
