#include "cli/common.h"

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "models/model_resolver.h"
#include "sim/cost/cluster.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_writer.h"

namespace ddpscope::cli {

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

namespace ddpscope::cli {

void addTraceOutputFlags(ArgParser& parser, const std::string& traceHelp) {
  parser.option("trace", "PATH", traceHelp)
      .option("trace-format", "chrome|kineto",
              "chrome (default): one Chrome/Perfetto file; kineto: PyTorch profiler traces, one "
              "file per rank (PATH with .rankN before .json), as HTA's TraceAnalysis reads them");
}

Status checkTraceOutputFlags(const ParsedArgs& args) {
  const auto format = args.value("trace-format");
  if (!format) return Status::ok();
  if (*format != "chrome" && *format != "kineto") {
    return invalidArgument("--trace-format: expected chrome or kineto, got '" + *format + "'");
  }
  if (!args.has("trace")) return invalidArgument("--trace-format needs --trace PATH");
  return Status::ok();
}

StatusOr<std::vector<std::string>> writeTraceOutput(const traces::Timeline& timeline,
                                                    const ParsedArgs& args) {
  RETURN_IF_ERROR(checkTraceOutputFlags(args));
  std::vector<std::string> files;
  const auto path = args.value("trace");
  if (!path) return files;
  if (args.value("trace-format").value_or("chrome") == "chrome") {
    RETURN_IF_ERROR(traces::writeChromeTrace(timeline, *path));
    files.push_back(*path);
    return files;
  }
  for (int r = 0; r < timeline.rankCount(); ++r) {
    files.push_back(traces::perRankTracePath(*path, timeline.rank(r).rank));
    RETURN_IF_ERROR(traces::writeKinetoTrace(timeline, r, files.back()));
  }
  return files;
}

std::string traceWrittenLine(const std::vector<std::string>& files, const ParsedArgs& args) {
  if (files.empty()) return "";
  if (args.value("trace-format").value_or("chrome") == "chrome") {
    return "trace written to " + files[0] + " (open in https://ui.perfetto.dev)\n";
  }
  std::string line = "PyTorch profiler (Kineto) traces written, one per rank:";
  for (const std::string& f : files) line += " " + f;
  return line + "\n";
}

}  // namespace ddpscope::cli
