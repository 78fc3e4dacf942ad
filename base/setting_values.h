// SettingValues: named settings as text, the one input of every settings parser (all in api/,
// the only code that knows flag names).
//
// A name is the setting's command-line flag without its dashes; a switch that is on holds "" and
// one that is off is absent. The CLI's ArgParser fills one from argv, the Python package from
// keyword arguments, so both reach the same parsers (api/'s DDP flags, model and cluster
// settings, each verb's request) and get the same error messages, which name the setting as its
// flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope {

class SettingValues {
 public:
  // Sets (or replaces) one setting; a switch that is on takes "".
  void set(const std::string& name, std::string value) { m_values[name] = std::move(value); }
  bool has(const std::string& name) const { return m_values.count(name) > 0; }
  // The setting's value, or nullopt when absent (switches have value "").
  std::optional<std::string> value(const std::string& name) const;
  // Every given setting, by name.
  const std::map<std::string, std::string>& values() const { return m_values; }

  // Typed getters: absent → fallback; present but malformed → error naming the flag.
  StatusOr<double> positiveDouble(const std::string& name, double fallback) const;
  StatusOr<int64_t> positiveInt(const std::string& name, int64_t fallback) const;
  StatusOr<double> nonNegativeDouble(const std::string& name, double fallback) const;
  StatusOr<int64_t> nonNegativeInt(const std::string& name, int64_t fallback) const;

 private:
  std::map<std::string, std::string> m_values;
};

// Whether the text of a setting that takes "a name or a file" (--model, --cluster, --base) is
// to be read as a file: any text with a '/', ending in ".json", or naming an existing regular
// file. Callers try their built-in names first.
bool looksLikeFile(const std::string& text);

// The required text of --<name> ("expected --cluster NAME|FILE" when absent).
StatusOr<std::string> requiredNameOrFile(const SettingValues& values, const std::string& name);

// Comma-separated list of positive numbers / integers (sweep axes); `what` names the setting in
// errors ("--bucket-cap-mb").
StatusOr<std::vector<double>> parsePositiveList(const std::string& text, const std::string& what);
StatusOr<std::vector<int>> parsePositiveIntList(const std::string& text, const std::string& what);

// One accepted setting: its name (the flag without "--"), the value's name in help ("MiB"; empty
// for a switch) and its help text. Command-line flag sets and the Python API are built from
// lists of these, so a setting is declared once.
struct SettingSpec {
  std::string name;
  std::string valueName;
  std::string help;
};

// Error when `values` holds a name none of `specs` declares, else ok. The message is the CLI's
// for an unknown flag ("unknown flag --foo"), followed by `hint`.
Status checkSettingNames(const SettingValues& values, const std::vector<SettingSpec>& specs,
                         const std::string& hint = "");

}  // namespace ddpscope
