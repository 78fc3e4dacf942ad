// One function per `ddpscope` subcommand (private to the CLI library).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope::cli {

struct CommandIo {
  std::ostream& out;
  std::ostream& err;
  int* exitCode = nullptr;  // a command that runs a child process reports its exit code here
};

// A noun's verbs (`ddpscope cluster list`): its subcommands with their synopsis and summary.
struct Subcommand {
  const char* synopsis;  // "show NAME": the first word is the subcommand's name
  const char* summary;
  Status (*run)(const std::vector<std::string>& args, CommandIo io);
};
// Runs the subcommand argv[0] names with the rest of argv; no argument, --help, -h or help print
// the noun's usage (generated from `subcommands`); an unknown one is InvalidArgument listing them.
Status runSubcommand(const std::string& noun, const std::vector<Subcommand>& subcommands,
                     const std::vector<std::string>& argv, CommandIo io);

// Each returns OK after writing its output, or the error to report (exit code from the Status).
Status runModelCommand(const std::vector<std::string>& args, CommandIo io);
Status runBucketsCommand(const std::vector<std::string>& args, CommandIo io);
Status runOverlapCommand(const std::vector<std::string>& args, CommandIo io);
Status runTuneReportCommand(const std::vector<std::string>& args, CommandIo io);
Status runQuickstartCommand(const std::vector<std::string>& args, CommandIo io);

}  // namespace ddpscope::cli

namespace ddpscope::cli {
Status runAllreduceCommand(const std::vector<std::string>& args, CommandIo io);
Status runClusterListCommand(const std::vector<std::string>& args, CommandIo io);
Status runClusterCommand(const std::vector<std::string>& args, CommandIo io);
Status runHostProfileCommand(const std::vector<std::string>& args, CommandIo io);
Status runSimulateCommand(const std::vector<std::string>& args, CommandIo io);
Status runSweepCommand(const std::vector<std::string>& args, CommandIo io);
Status runPlanCommand(const std::vector<std::string>& args, CommandIo io);
}  // namespace ddpscope::cli

namespace ddpscope::cli {
Status runRunCommand(const std::vector<std::string>& args, CommandIo io);
Status runImportTorchCommand(const std::vector<std::string>& args, CommandIo io);
}  // namespace ddpscope::cli

namespace ddpscope::cli {
Status runReplayCommand(const std::vector<std::string>& args, CommandIo io);
Status runCalibrateCommand(const std::vector<std::string>& args, CommandIo io);
Status runValidateCommand(const std::vector<std::string>& args, CommandIo io);
}  // namespace ddpscope::cli
