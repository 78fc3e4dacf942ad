// `ddpscope cluster from-topo | calibrate | list | show`: describe your own machine from the
// output of `nvidia-smi topo -m` (the work is sim/topo/cluster_from_topo.h), fit a cluster's
// collective times to your own nccl-tests output (sim/cost/latency_fit.h), list or print the
// built-in clusters.
#include <iomanip>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "api/cluster_settings.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "io/file_output.h"

namespace ddpscope::cli {

namespace {

Status runClusterShow(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope cluster show", "NAME",
                   "Prints the JSON of a built-in cluster (format: sim/cost/clusters/FORMAT.md).");
  parser.positional("NAME", "a built-in cluster (ddpscope cluster list)", true);
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const std::string json, api::builtinClusterJsonText(args.positionals()[0]));
  io.out << json;
  if (!json.empty() && json.back() != '\n') io.out << "\n";
  return Status::ok();
}

Status runFromTopo(const std::vector<std::string>& argvIn, CommandIo io) {
  ArgParser parser(
      "ddpscope cluster from-topo",
      "TOPO.txt --gpu MODEL [--nic-gbps G] [--nics LIST|none]\n"
      "       [--nvlink-hosts H] [--cpu CPU] [--cpu-vendor V] [--fabric F] [--name N]\n"
      "       [-o|--out FILE] [--nodes N]",
      "Builds a cluster file (sim/cost/clusters/FORMAT.md) from the output of `nvidia-smi topo "
      "-m`\n"
      "on one node: GPUs per node from the GPU columns; NVSwitch (NV<k> to every peer), a direct\n"
      "NVLink mesh (NV1/NV2 as on DGX-1) or PCIe from the GPU-GPU entries, at NCCL's per-link\n"
      "NVLink rate for the GPU; the NICs from each GPU's closest NIC columns (rails; storage or\n"
      "Ethernet NICs no GPU is closest to drop out). The GPU model brings the device, NCCL "
      "version\n"
      "and DDP host costs of the built-in cluster that has it. Prints what it derived and, as a\n"
      "check, the predicted 256 MiB allreduce busbw on --nodes nodes. Use the file with\n"
      "--cluster in simulate, sweep, plan and allreduce.");
  parser.positional("TOPO.txt", "the output of `nvidia-smi topo -m` (a pasted copy is fine)", true)
      .options(api::topoClusterSettingList())
      .option("out", "FILE", "write the cluster JSON here (-o FILE works too); default: stdout")
      .options(api::topoCheckSettingList())
      .epilog(
          "example:\n"
          "  nvidia-smi topo -m > topo.txt\n"
          "  ddpscope cluster from-topo topo.txt --gpu h100 --nic-gbps 400 -o my.json\n"
          "  ddpscope simulate --model gpt2-xl --cluster my.json --nodes 4\n"
          "  ddpscope cluster from-topo tray.txt --gpu gb200 --nvlink-hosts 18 --nic-gbps 400 \\\n"
          "      --cpu-vendor arm -o nvl72.json    # one GB200 tray's topo -m, a 72-GPU rack\n"
          "  ddpscope cluster from-topo pcie.txt --gpu a100-pcie --cpu intel-srp --nics none\n"
          "      # 8 PCIe GPUs on two Sapphire Rapids sockets: the ring crosses UPI at 22 GB/s");
  parser.shortAlias("-o", "out");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argvIn, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const api::FromTopoRequest request,
                   api::parseFromTopoRequest(args, args.positionals()[0]));
  ASSIGN_OR_RETURN(const sim::topo::TopoCluster cluster, api::buildClusterFromTopo(request));
  const sim::ClusterSpec& spec = cluster.spec;
  // The busbw check first: a bad --nodes is an error before anything is printed.
  ASSIGN_OR_RETURN(const api::TopoBusbwCheck check, api::topoBusbwCheck(request, spec));
  const sim::WorldLayout& layout = check.layout;
  const sim::CollectiveEstimate& e = check.estimate;

  const auto out = args.value("out");
  std::unique_ptr<io::OutputFile> file;  // opened before printing: a bad path prints nothing
  if (out) {
    ASSIGN_OR_RETURN(file, io::OutputFile::open(*out));
  }
  std::ostream& report = out ? io.out : io.err;
  report << "cluster " << spec.name << " from " << request.matrix.origin << ":\n"
         << "  device         " << spec.device.name << " (from built-in " << cluster.baseCluster
         << ")\n"
         << "  gpus_per_node  " << spec.gpusPerNode;
  if (spec.intraNode.hosts > 1) {
    report << " (" << spec.intraNode.hosts << " hosts x " << spec.gpusPerNode / spec.intraNode.hosts
           << " on one NVLink domain)";
  }
  report << "\n"
         << "  intra_node     " << sim::intraNodeLinkName(spec.intraNode.type);
  if (spec.intraNode.type != sim::IntraNodeLink::kPcie) {
    report << ", " << spec.intraNode.nvlinkLinks << " NVLinks x "
           << formatShortest(spec.intraNode.nvlinkGBpsPerLink) << " GB/s"
           << (spec.intraNode.nvls ? ", NVLS" : "");
  }
  report << ", PCIe Gen" << spec.intraNode.pcieGen;
  if (spec.intraNode.interCpuGBps > 0) {
    report << ", across the CPU interconnect at " << formatShortest(spec.intraNode.interCpuGBps)
           << " GB/s (SYS)";
  }
  report << "\n";
  if (spec.interNode.nicsPerNode > 0) {
    report << "  inter_node     " << spec.interNode.nicsPerNode << " NICs x "
           << formatShortest(spec.interNode.nicGbps) << " Gb/s " << spec.interNode.fabric << "\n";
    for (const sim::topo::TopoRail& r : cluster.rails) {
      report << "    " << std::left << std::setw(12) << r.nic << std::right;
      for (size_t i = 0; i < r.gpus.size(); ++i) report << (i ? ", " : "") << r.gpus[i];
      report << " (" << sim::topo::linkKindName(r.path) << ")\n";
    }
  } else {
    report << "  inter_node     none (one node)\n";
  }
  report << "  cpu_vendor     " << spec.cpuVendor << "\n";
  for (const std::string& note : cluster.notes) report << "  note: " << note << "\n";

  report << "  check          allreduce 256 MiB on " << layout.nodes << " node(s) x "
         << layout.gpusPerNode << ": busbw " << std::fixed << std::setprecision(1) << e.busbwGBps
         << " GB/s (" << e.algorithm << "/" << e.protocol << ")\n"
         << std::defaultfloat;

  if (file) {
    file->stream() << cluster.jsonText;
    RETURN_IF_ERROR(file->close());
    io.out << "wrote " << *out << " (use: --cluster " << *out << ")\n";
  } else {
    io.out << cluster.jsonText;
  }
  return Status::ok();
}

Status runCalibrate(const std::vector<std::string>& argvIn, CommandIo io) {
  ArgParser parser(
      "ddpscope cluster calibrate",
      "--nccl-tests LOG[,LOG...] [--cluster BASE|FILE] [--ranks N] [--nodes N]\n"
      "       [--nccl-algo A] [--name N] [-o|--out FILE] [--json]",
      "Calibrates a cluster's allreduce times on the output of nccl-tests' all_reduce_perf on\n"
      "your machines and writes the calibrated cluster. Measured beats modelled: each log's\n"
      "curve (size -> out-of-place time) goes into the cluster, and at that log's layout an\n"
      "allreduce takes the curve's time, interpolated in log-log between measured sizes. The\n"
      "model underneath is fitted too, for other layouts: the latency (base + per-step cost\n"
      "inside and across nodes, steps as NCCL's tuner counts them) on the latency-bound sizes of\n"
      "every log, the bandwidth (the speeds NCCL's tuner reads) on each log's largest sizes (up\n"
      "to 3, >= 64 MiB); at another layout of the same kind (one node, or several) the model's\n"
      "time is corrected by the log's residual (measured / modelled, by size). A term the logs\n"
      "cannot separate (one GPU count: base and per-step; one node: the inter-node step) is\n"
      "kept from BASE and reported. Several logs of one cluster (other world sizes or nodes)\n"
      "are fitted together. Ranks and nodes come from each log's '# Rank N ... on HOST' lines.\n"
      "Prints the fit, each log's rows against the calibrated cluster and the fitted model, and\n"
      "the sizes where the model's shape disagrees with a log (a knee it does not have).");
  parser.options(api::ncclTestsCalibrationSettingList())
      .option("out", "FILE", "write the cluster JSON here (-o FILE works too); default: stdout")
      .flag("json", "print the fit and the checks as JSON (the cluster goes to --out)")
      .epilog(
          "example:\n"
          "  ./build/all_reduce_perf -b 8 -e 1G -f 2 -g 8 > ar.txt\n"
          "  ddpscope cluster calibrate --nccl-tests ar.txt --cluster dgx-h100 -o mine.json\n"
          "  ddpscope sweep --model gpt2-xl --cluster mine.json --nodes 4");
  parser.shortAlias("-o", "out");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argvIn, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(api::NcclTestsCalibrationRun run, api::calibrateFromNcclTestsSettings(args));
  const sim::NcclTestsCalibration& cal = run.calibration;
  const auto out = args.value("out");
  std::unique_ptr<io::OutputFile> file;
  if (out) {
    ASSIGN_OR_RETURN(file, io::OutputFile::open(*out));
  }
  const sim::LatencyFitResult& lat = cal.latency;
  if (args.has("json")) {
    nlohmann::json j = sim::ncclTestsCalibrationJson(cal);
    if (!file) j["cluster_json"] = nlohmann::json::parse(cal.jsonText);
    io.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::ostream& report = out ? io.out : io.err;
    report << "cluster " << cal.spec.name << " from " << cal.logs.size() << " log(s)\n";
    auto term = [&](const char* name, double v, bool fitted) {
      report << "  " << std::left << std::setw(15) << name << std::right << std::fixed
             << std::setprecision(2) << std::setw(8) << v << " us  "
             << (fitted ? "fitted" : "kept from the base cluster") << "\n"
             << std::defaultfloat;
    };
    term("base", lat.fit.baseUs, lat.baseFitted);
    term("intra_step", lat.fit.intraStepUs, lat.intraFitted);
    term("inter_step", lat.fit.interStepUs, lat.interFitted);
    report << "  latency fit on " << lat.rowsUsed << " latency-bound sizes\n";
    if (cal.bandwidthRows > 0) {
      report << "  bandwidth      NIC x" << std::fixed << std::setprecision(3) << cal.nicScale
             << ", intra-node link x" << cal.linkScale << std::defaultfloat
             << " of the base cluster's, fitted on " << cal.bandwidthRows << " largest sizes\n";
    }
    for (const std::string& note : cal.notes) report << "  note: " << note << "\n";
    for (const sim::CalibratedLog& l : cal.logs) {
      report << "log " << l.log.origin << ": " << l.log.rows.size() << " sizes, "
             << l.layout.worldSize() << " GPUs on " << l.layout.nodes << " node(s)"
             << (l.log.gpu.empty() ? "" : ", " + l.log.gpu)
             << (l.log.ncclVersion.empty() ? "" : ", NCCL " + l.log.ncclVersion) << "\n"
             << "  predicted: the calibrated cluster at this layout (its measured curve); "
                "model: the fitted model alone\n";
      report << "  " << std::setw(12) << "bytes" << std::setw(12) << "measured_us" << std::setw(13)
             << "predicted_us" << std::setw(9) << "error" << std::setw(12) << "model_us"
             << std::setw(9) << "error"
             << "  model's pick\n";
      for (const sim::CalibrationCheck& c : l.checks) {
        report << "  " << std::setw(12) << c.bytes << std::fixed << std::setprecision(2)
               << std::setw(12) << c.measuredUs << std::setw(13) << c.predictedUs
               << std::setprecision(1) << std::setw(8) << std::showpos << c.errorPercent << "%"
               << std::setprecision(2) << std::noshowpos << std::setw(12) << c.modelledUs
               << std::setprecision(1) << std::setw(8) << std::showpos << c.modelErrorPercent
               << std::noshowpos << "%  " << c.algorithm << "/" << c.protocol << "\n"
               << std::defaultfloat;
      }
      for (const std::string& note : l.notes) report << "  note: " << note << "\n";
    }
    if (!file) io.out << cal.jsonText;
  }
  if (file) {
    file->stream() << cal.jsonText;
    RETURN_IF_ERROR(file->close());
    io.out << "wrote " << *out << " (use: --cluster " << *out << ")\n";
  }
  return Status::ok();
}

}  // namespace

Status runClusterCommand(const std::vector<std::string>& argv, CommandIo io) {
  return runSubcommand(
      "cluster",
      {{"from-topo", "build a cluster file from `nvidia-smi topo -m` output and the GPU model",
        runFromTopo},
       {"calibrate", "fit a cluster's allreduce latency and bandwidth to all_reduce_perf output",
        runCalibrate},
       {"list", "the built-in clusters, one line each", runClusterListCommand},
       {"show NAME", "print a built-in cluster's JSON (a starting point for your own)",
        runClusterShow}},
      argv, io);
}

}  // namespace ddpscope::cli
