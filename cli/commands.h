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
