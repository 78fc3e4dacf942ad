// The `ddpscope` command line: subcommand dispatch, in-process so tests can drive it.
//
// runCli() never throws and never exits; it returns the process exit code:
// 0 success, 2 bad input (flags, files, fields), 1 other failures. Errors are one
// line on `err`: "ddpscope <command>: error: <message>".
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ddpscope::cli {

// `args` excludes the program name: {"buckets", "--model", "resnet18"}.
int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ddpscope::cli
