#include "cli/common.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_writer.h"

namespace ddpscope::cli {

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
