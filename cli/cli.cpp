#include "cli/cli.h"

#include <exception>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/build_info.h"
#include "cli/commands.h"

namespace ddpscope::cli {
namespace {

struct Command {
  const char* name;
  const char* summary;
  std::function<Status(const std::vector<std::string>&, CommandIo)> run;
};

const std::vector<Command>& commands() {
  static const std::vector<Command> kCommands = {
      {"quickstart", "the main job on an embedded default: the zoo and a bucket plan",
       runQuickstartCommand},
      {"model", "list: the embedded model zoo; show M: one model's parameters and layers",
       runModelCommand},
      {"buckets", "PyTorch DDP's exact bucket plan for a model (iteration 1 or steady state)",
       runBucketsCommand},
      {"simulate", "simulate DDP iterations of a model on a cluster: step time, exposed comm",
       runSimulateCommand},
      {"sweep", "simulate many bucket caps / world sizes / find_unused settings; best cap",
       runSweepCommand},
      {"plan", "the best bucket layout for a model on a cluster and the DDP call that builds it",
       runPlanCommand},
      {"allreduce", "predicted allreduce time, algbw and busbw per size on a cluster (NCCL model)",
       runAllreduceCommand},
      {"cluster", "list; show NAME; from-topo (from `nvidia-smi topo -m`); calibrate (nccl-tests)",
       runClusterCommand},
      {"host-profile", "list; show NAME; fit (what the CPU pays per op, from profiled steps)",
       runHostProfileCommand},
      {"overlap", "compute/communication overlap of a Chrome trace (HTA definition)",
       runOverlapCommand},
      {"run", "train for real: N MPI ranks of the DDP runtime worker (ddpscope-run)",
       runRunCommand},
      {"replay", "re-simulate a measured run with its measured compute; what-ifs from it",
       runReplayCommand},
      {"calibrate", "fit the cluster model (alpha-beta, contention, compute) to measured runs",
       runCalibrateCommand},
      {"validate", "train over a grid, calibrate on part, predict the rest: MAPE",
       runValidateCommand},
      {"import-torch", "PyTorch profiler traces of a DDP job -> ddpscope trace, buckets",
       runImportTorchCommand},
      {"tune-report", "what ddpscope.torch.tune measured in a job and why it kept or switched",
       runTuneReportCommand},
  };
  return kCommands;
}

// Commands renamed in the one grammar (nouns with verbs): the old name still works for one
// release, with a note.
struct RenamedCommand {
  const char* old;
  const char* noun;
  const char* verb;
};
const RenamedCommand kRenamedCommands[] = {
    {"models", "model", "list"},
    {"clusters", "cluster", "list"},
};

void printTopLevelHelp(std::ostream& out) {
  out << "usage: ddpscope <command> [options]\n\n"
         "ddpscope answers three questions for PyTorch DistributedDataParallel users: which\n"
         "bucket_cap_mb to use, whether the gradient allreduce hides behind backward compute,\n"
         "and what the step time becomes on another cluster or world size.\n\ncommands:\n";
  for (const auto& c : commands()) {
    std::string name = c.name;
    out << "  " << name << std::string(name.size() < 14 ? 14 - name.size() : 1, ' ') << c.summary
        << "\n";
  }
  out << "\nRun 'ddpscope <command> --help' for a command's options.\n";
}

}  // namespace

Status runSubcommand(const std::string& noun, const std::vector<Subcommand>& subcommands,
                     const std::vector<std::string>& argv, CommandIo io) {
  auto nameOf = [](const Subcommand& s) {
    const std::string synopsis = s.synopsis;
    return synopsis.substr(0, synopsis.find(' '));
  };
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    io.out << "usage: ddpscope " << noun << " <subcommand> [options]\n\nsubcommands:\n";
    for (const Subcommand& s : subcommands) {
      const std::string synopsis = s.synopsis;
      io.out << "  " << synopsis
             << std::string(synopsis.size() < 12 ? 14 - synopsis.size() : 2, ' ') << s.summary
             << "\n";
    }
    io.out << "\nRun 'ddpscope " << noun << " <subcommand> --help' for its options.\n";
    return Status::ok();
  }
  std::string expected;
  for (size_t i = 0; i < subcommands.size(); ++i) {
    if (nameOf(subcommands[i]) == argv[0]) {
      return subcommands[i].run(std::vector<std::string>(argv.begin() + 1, argv.end()), io);
    }
    expected += (i == 0                        ? ""
                 : i + 1 == subcommands.size() ? " or "
                                               : ", ") +
                nameOf(subcommands[i]);
  }
  return invalidArgument("unknown subcommand '" + argv[0] + "'; expected " + expected +
                         " (see 'ddpscope " + noun + " --help')");
}

int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    printTopLevelHelp(out);
    return 0;
  }
  if (args[0] == "--version") {
    out << "ddpscope " << kVersion << " (" << kBuildType << ")\n";
    out << "optional parts (yes: built; no: why not):\n";
    for (const char* line : kBuildFeatures) out << "  " << line << "\n";
    return 0;
  }
  std::vector<std::string> argv = args;
  for (const RenamedCommand& r : kRenamedCommands) {
    if (argv[0] != r.old) continue;
    err << "ddpscope: note: 'ddpscope " << r.old << "' is deprecated and goes in the next "
        << "release; use 'ddpscope " << r.noun << " " << r.verb << "'\n";
    argv[0] = r.verb;
    argv.insert(argv.begin(), r.noun);
  }
  for (const auto& c : commands()) {
    if (argv[0] != c.name) continue;
    std::vector<std::string> rest(argv.begin() + 1, argv.end());
    Status status;
    int exitCode = 0;
    try {
      status = c.run(rest, CommandIo{out, err, &exitCode});
    } catch (const std::exception& e) {
      // Exceptions stop at this boundary (docs/style.md §7); reaching here is a bug.
      status = internalError(std::string("unexpected exception: ") + e.what());
    }
    if (!status.isOk()) {
      err << "ddpscope " << c.name << ": error: " << status.message() << "\n";
      return status.exitCode();
    }
    return exitCode;
  }
  err << "ddpscope: error: unknown command '" << argv[0] << "' (see 'ddpscope --help')\n";
  return 2;
}

}  // namespace ddpscope::cli
