// Helpers shared by the CLI subcommands.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/arg_parser.h"
#include "traces/timeline.h"

namespace ddpscope::cli {

// Writes `rows` (a JSON array of objects, as the command's --json prints them) to `path` as CSV
// with these columns, in this order: numbers as JSON writes them, booleans 1/0, strings quoted
// when they hold a comma, quote or newline, arrays and objects as their JSON text. Errors name
// --csv and the path.
Status writeCsvFile(const std::string& path, const std::vector<std::string>& columns,
                    const nlohmann::json& rows);

// --trace PATH and --trace-format chrome|kineto: a timeline written as one Chrome/Perfetto file
// (chrome, the default) or as PyTorch profiler (Kineto) traces, one file per rank at
// traces::perRankTracePath(PATH, rank), that HTA and TraceLens read (traces/kineto_writer.h).
void addTraceOutputFlags(ArgParser& parser, const std::string& traceHelp);
// --trace-format without --trace, or an unknown format: InvalidArgument naming the flag.
Status checkTraceOutputFlags(const ParsedArgs& args);
// Writes `timeline` as the flags say; the files written (none without --trace).
StatusOr<std::vector<std::string>> writeTraceOutput(const traces::Timeline& timeline,
                                                    const ParsedArgs& args);
// "trace written to PATH (open in https://ui.perfetto.dev)\n" or, for Kineto files, the list.
std::string traceWrittenLine(const std::vector<std::string>& files, const ParsedArgs& args);

}  // namespace ddpscope::cli
