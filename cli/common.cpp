#include "cli/common.h"

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "models/model_resolver.h"
#include "sim/cost/cluster.h"

namespace ddpscope::cli {

void addModelFlags(ArgParser& parser) {
  parser.options(models::modelSettingList());
}

StatusOr<models::ModelSpec> loadModelFromFlags(const ParsedArgs& args) {
  return models::loadModelFromSettings(args);
}

StatusOr<std::vector<int>> parseIndexList(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::string token;
  int position = 0;
  auto flush = [&]() -> Status {
    if (token.empty()) return Status::ok();
    auto v = parseInt64(token);
    if (!v || *v < 0 || *v > INT32_MAX) {
      return invalidArgument(what + ": entry " + std::to_string(position) +
                             ": expected a non-negative parameter index, got '" + token + "'");
    }
    out.push_back(static_cast<int>(*v));
    ++position;
    token.clear();
    return Status::ok();
  };
  for (char c : text) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      RETURN_IF_ERROR(flush());
    } else {
      token.push_back(c);
    }
  }
  RETURN_IF_ERROR(flush());
  if (out.empty())
    return invalidArgument(what + ": expected a list of parameter indices, got nothing");
  return out;
}

StatusOr<std::vector<int>> readIndexListFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  std::string_view trimmed = trimString(text);
  if (!trimmed.empty() && (trimmed.front() == '[' || trimmed.front() == '{')) {
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return invalidArgument(path + ": invalid JSON");
    const nlohmann::json* list = &doc;
    std::string where = path;
    if (doc.is_object()) {
      if (!doc.contains("grad_ready_order")) {
        return invalidArgument(path +
                               ": expected a JSON array of parameter indices or an object "
                               "with \"grad_ready_order\"");
      }
      list = &doc["grad_ready_order"];
      where = path + ": grad_ready_order";
    }
    if (!list->is_array())
      return invalidArgument(where + ": expected an array of parameter indices");
    std::vector<int> out;
    for (size_t i = 0; i < list->size(); ++i) {
      const auto& v = (*list)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return invalidArgument(where + "[" + std::to_string(i) +
                               "]: expected a non-negative integer parameter index, got " +
                               v.dump());
      }
      out.push_back(v.get<int>());
    }
    if (out.empty())
      return invalidArgument(where + ": expected a non-empty list of parameter indices");
    return out;
  }
  return parseIndexList(text, path);
}

}  // namespace ddpscope::cli

namespace ddpscope::cli {

void addClusterFlags(ArgParser& parser) {
  parser.options(sim::clusterSettingList());
}

StatusOr<sim::ClusterSpec> loadClusterFromFlags(const ParsedArgs& args) {
  return sim::loadClusterFromSettings(args);
}

StatusOr<int64_t> parseByteSize(const std::string& text, const std::string& what) {
  std::string t(trimString(text));
  size_t pos = 0;
  while (pos < t.size() && (std::isdigit(static_cast<unsigned char>(t[pos])) || t[pos] == '.'))
    ++pos;
  std::string number = t.substr(0, pos);
  std::string unit = t.substr(pos);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    scale = 1024.0 * 1024.0;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    scale = 1024.0 * 1024.0 * 1024.0;
  auto value = parseDouble(number);
  if (scale == 0 || !value || *value <= 0) {
    return invalidArgument(
        what + ": expected a positive size like 1048576, 64K, 25MiB or 1G, got '" + text + "'");
  }
  double bytes = *value * scale;
  if (bytes < 1 || bytes > 1e15) {
    return invalidArgument(what + ": size out of range [1 B, 1 PB]: '" + text + "'");
  }
  return static_cast<int64_t>(bytes);
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

StatusOr<LayoutFlags> parseLayoutFlags(const ParsedArgs& args,
                                       std::optional<int> defaultWorldSize) {
  return sim::parseLayoutSettings(args, defaultWorldSize);
}

Status writeCsvFile(const std::string& path, const std::vector<std::string>& columns,
                    const nlohmann::json& rows) {
  auto cell = [](const nlohmann::json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
    std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  };
  std::ofstream out(path);
  if (!out) return invalidArgument("--csv: cannot write '" + path + "'");
  for (size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << columns[i];
  out << "\n";
  for (const nlohmann::json& row : rows) {
    for (size_t i = 0; i < columns.size(); ++i) {
      out << (i ? "," : "") << (row.contains(columns[i]) ? cell(row[columns[i]]) : "");
    }
    out << "\n";
  }
  if (!out) return invalidArgument("--csv: write to '" + path + "' failed");
  return Status::ok();
}

}  // namespace ddpscope::cli
