#include <nlohmann/json.hpp>
#include <ostream>

#include "api/cluster_settings.h"
#include "api/simulation_json.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "cli/sim_text.h"
#include "traces/chrome_writer.h"

namespace ddpscope::cli {

Status runSimulateCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope simulate",
      "--model M --cluster C [--nodes N | --world-size W]\n"
      "       [--bucket-cap-mb X] [--find-unused] [--static-graph] [--no-sync-steps K]\n"
      "       [--comm-hook fp16|bf16|powersgd:R] [--torch-version 2.15|1.13|1.5] [--batch B]\n"
      "       [PyTorch 2.15: --bucket-cap-mb-list L,... --batched-grad-copy ...]\n"
      "       [--iterations I] [--all-ranks --jitter PCT --seed S] [--strategy ddp|dp]\n"
      "       [--trace out.json] [--json]",
      "Simulates DDP training iterations of a model on a described cluster: the same reducer\n"
      "state machine as PyTorch (bucket order, rebuild, find_unused), a roofline compute model\n"
      "(or the cluster's kernel fit, layer times fitted on real traces: dgx-h100, hgx-h200 at\n"
      "bf16; another GPU's with --kernel-fit-from, carried through the specs) and NCCL's cost\n"
      "model. Prints step time, exposed communication and overlap, and\n"
      "what DDP costs besides the wire: the host time of each allreduce launch, autograd hook,\n"
      "copy-back launch and finalize wait and of DDP's forward wrapper (the cluster's\n"
      "ddp_overheads), the host stall they cause, the CTAs each NCCL call holds on the GPU\n"
      "and how much they slow compute while it runs (nccl_sm_contention), and the step\n"
      "against plain training; --trace writes a Chrome/Perfetto timeline (pid = rank;\n"
      "compute, comm and host lanes).");
  parser.options(api::simulationSettingList(/*sweep=*/false));
  addTraceOutputFlags(parser, "write the trace here (.json; .json.gz compresses)");
  parser.flag("json", "machine-readable summary")
      .flag("quiet", "no progress on stderr (shown for simulations that take more than 2 s)")
      .epilog(
          "example: ddpscope simulate --model gpt2-small --cluster dgx-a100 --nodes 4 \\\n"
          "           --bucket-cap-mb 50 --trace gpt2.json\n"
          "         ddpscope simulate --model resnet50 --cluster dgx-a100 --world-size 8 \\\n"
          "           --all-ranks --trace-format kineto --trace sim/resnet50.json\n"
          "         # sim/resnet50.rank0.json ... rank7.json: TraceAnalysis(trace_dir=\"sim\")");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  RETURN_IF_ERROR(checkTraceOutputFlags(args));
  ASSIGN_OR_RETURN(api::SimulationRequest req, api::parseSimulationRequest(args, /*sweep=*/false));
  ASSIGN_OR_RETURN(const sim::WorldLayout layout, api::layoutFromSettings(args, req.cluster));
  req.options.recordTrace = args.has("trace");
  Progress progress = Progress::forCommand("simulate", 0, io.err, args.has("quiet"));
  req.options.progress = [&progress](int done, int total) {
    progress.setTotal(static_cast<size_t>(total));
    progress.update(static_cast<size_t>(done));
  };
  ASSIGN_OR_RETURN(sim::SimResult result, api::runSimulation(req, layout));
  ASSIGN_OR_RETURN(const std::vector<std::string> traceFiles,
                   writeTraceOutput(result.timeline, args));
  if (args.has("json")) {
    nlohmann::json out = api::simSummaryJson(req, layout, result.summary);
    ASSIGN_OR_RETURN(out["layers"], api::layerKernelsJson(req));
    if (auto path = args.value("trace")) out["trace"] = *path;
    io.out << out.dump(2) << "\n";
  } else {
    io.out << formatSimSummary(req, layout, result.summary);
    io.out << traceWrittenLine(traceFiles, args);
  }
  return Status::ok();
}

}  // namespace ddpscope::cli
