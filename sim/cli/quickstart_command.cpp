#include <ostream>

#include "sim/cli/arg_parser.h"
#include "sim/cli/commands.h"

namespace ddpscope::cli {

// The main job on an embedded default. For now: the zoo, then the steady-state bucket plan of
// one model at PyTorch's defaults (the simulator's sweep replaces this when it lands).
Status runQuickstartCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope quickstart", "[--model NAME]",
                   "Prints the embedded model zoo, then the bucket plan PyTorch DDP uses for one\n"
                   "model at its defaults (bucket_cap_mb=25, first bucket 1 MiB, steady state).");
  parser.option("model", "NAME", "zoo model to plan (default gpt2-small)");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  std::string model = args.value("model").value_or("gpt2-small");
  io.out << "== ddpscope model zoo ==\n";
  RETURN_IF_ERROR(runModelsCommand({}, io));
  io.out << "\n== DDP bucket plan: " << model << ", bucket_cap_mb=25 (default), steady state ==\n";
  RETURN_IF_ERROR(runBucketsCommand({"--model", model}, io));
  io.out << "\nNext: 'ddpscope buckets --help' to vary bucket_cap_mb, find_unused_parameters,\n"
            "static_graph and the PyTorch semantics profile.\n";
  return Status::ok();
}

}  // namespace ddpscope::cli
