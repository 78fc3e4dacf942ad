#include <filesystem>
#include <ostream>
#include <system_error>

#include "cli/arg_parser.h"
#include "cli/commands.h"

namespace ddpscope::cli {

// The main job on an embedded default: a bucket_cap_mb sweep of gpt2-small on DGX A100 nodes,
// with the best configuration's timeline written for Perfetto / the GUI.
Status runQuickstartCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope quickstart", "[--model NAME] [--cluster NAME] [--out DIR]",
      "Sweeps bucket_cap_mb (1..200 MiB) over 1, 2, 4 and 8 nodes for one zoo model on one\n"
      "built-in cluster (default gpt2-small on dgx-a100), prints step time, exposed\n"
      "communication and overlap per configuration and the best cap per world size, and writes\n"
      "the best configuration's Chrome trace per world size into DIR.");
  parser.option("model", "NAME", "zoo model (default gpt2-small)")
      .option("cluster", "NAME", "built-in cluster (default dgx-a100)")
      .option("out", "DIR", "directory for the traces (default ddpscope-out)")
      .flag("json", "the sweep's JSON (ddpscope sweep --json) instead of the table")
      .flag("quiet", "no progress on stderr");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  std::string model = args.value("model").value_or("gpt2-small");
  std::string cluster = args.value("cluster").value_or("dgx-a100");
  std::string outDir = args.value("out").value_or("ddpscope-out");
  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec)
    return invalidArgument("--out: cannot create directory '" + outDir + "': " + ec.message());
  std::string trace =
      (std::filesystem::path(outDir) / (model + "-" + cluster + "-best.json")).string();
  std::vector<std::string> sweep = {"--model", model,     "--cluster", cluster,
                                    "--nodes", "1,2,4,8", "--trace",   trace};
  for (const char* flag : {"json", "quiet"}) {
    if (args.has(flag)) sweep.push_back(std::string("--") + flag);
  }
  RETURN_IF_ERROR(runSweepCommand(sweep, io));
  if (args.has("json")) return Status::ok();
  io.out << "\nNext: open a trace in https://ui.perfetto.dev, or 'ddpscope overlap " << outDir
         << "/<trace>.json';\n'ddpscope sweep --help' and 'ddpscope simulate --help' for every "
            "setting; 'ddpscope buckets --model "
         << model << "' for the exact bucket plan.\n";
  return Status::ok();
}

}  // namespace ddpscope::cli
