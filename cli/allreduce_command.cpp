#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "sim/cost/cluster.h"
#include "sim/cost/comm_model.h"
#include "sim/cost/measured_curve.h"

namespace ddpscope::cli {

// Prints the cost model's prediction for one allreduce per size, as nccl-tests reports it.
Status runAllreduceCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope allreduce", "--cluster C [--nodes N | --world-size W] --bytes S[,S...] [--json]",
      "Predicts one allreduce per buffer size with the cluster's collective cost model\n"
      "(NCCL's tuner model for GPU clusters, alpha-beta for CPU/MPI profiles): the chosen\n"
      "algorithm and protocol, time, algbw = S/t and busbw = algbw x 2(n-1)/n (nccl-tests).");
  parser.options(sim::clusterSettingList());
  parser.option("nodes", "N", "number of nodes (default 1; gb200-nvl72: 72-GPU racks)")
      .option("world-size", "W",
              "number of ranks (a multiple of the GPUs per node; default: one node's)")
      .option("bytes", "S[,S...]", "per-rank buffer sizes: 1048576, 64K, 25MiB, 1G (binary units)")
      .flag("json", "machine-readable output")
      .option("csv", "PATH", "also write the table as CSV")
      .epilog("example: ddpscope allreduce --cluster dgx-h100 --nodes 4 --bytes 1M,25M,1G");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(sim::ClusterSpec cluster, sim::loadClusterFromSettings(args));
  ASSIGN_OR_RETURN(const sim::LayoutSettings layoutFlags, sim::parseLayoutSettings(args));
  ASSIGN_OR_RETURN(sim::WorldLayout layout,
                   sim::makeWorldLayout(cluster, layoutFlags.nodes, layoutFlags.worldSize));
  auto bytesText = args.value("bytes");
  if (!bytesText) return invalidArgument("expected --bytes S[,S...]");
  std::vector<int64_t> sizes;
  for (const std::string& part : splitString(*bytesText, ',')) {
    ASSIGN_OR_RETURN(int64_t b, parseByteSize(part, "--bytes"));
    sizes.push_back(b);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<sim::CommModel> model, sim::makeCommModel(cluster, layout));

  nlohmann::json rows = nlohmann::json::array();
  std::ostringstream o;
  o << "allreduce on " << cluster.name << ": " << layout.nodes << " node(s) x "
    << layout.gpusPerNode << " = " << layout.worldSize() << " ranks, NCCL " << cluster.ncclVersion
    << " model\n";
  const sim::MeasuredLatency& measured = cluster.measuredLatency;
  if (cluster.commModel == sim::CommModelKind::kNccl) {
    o << "  pick: NCCL " << cluster.ncclVersion << " tuner (algorithm, protocol, channels)\n";
    if (measured.present) {
      o << "  time: measured latency (base " << formatShortest(measured.fit.baseUs) << " us + "
        << formatShortest(measured.fit.intraStepUs) << " us per step in a node + "
        << formatShortest(measured.fit.interStepUs)
        << " us per step across nodes) + bytes / the tuner's algbw\n"
        << "  latency measured on: " << measured.source << "\n"
        << "  stands for: " << measured.ncclEra << "\n";
    } else {
      o << "  time: the tuner's own latency + bytes / algbw + "
        << formatShortest(cluster.nccl.launchOverheadUs)
        << " us launch (no measured_latency in this cluster: small sizes are the tuner's "
           "guess)\n";
    }
  } else {
    o << "  time: alpha-beta ring model (alpha_beta in the cluster)\n";
  }
  const std::string timeSource = sim::allreduceTimeSource(cluster, layout);
  if (!timeSource.empty()) o << "  " << timeSource << "\n";
  o << std::right << std::setw(14) << "bytes" << std::setw(11) << "algorithm" << std::setw(9)
    << "protocol" << std::setw(13) << "time_us" << std::setw(13) << "algbw_GB/s" << std::setw(13)
    << "busbw_GB/s" << std::setw(10) << "latency"
    << "\n";
  for (int64_t bytes : sizes) {
    sim::CollectiveEstimate e = model->estimate(sim::Collective::kAllreduce, bytes);
    double timeUs = e.time.toMicros();
    rows.push_back({{"bytes", bytes},
                    {"algorithm", e.algorithm},
                    {"protocol", e.protocol},
                    {"time_us", timeUs},
                    {"algbw_gbps", e.algbwGBps},
                    {"busbw_gbps", e.busbwGBps},
                    {"ctas", e.ctas},
                    {"latency_source", e.latencySource}});
    if (!e.timeSource.empty()) rows.back()["time_source"] = e.timeSource;
    o << std::setw(14) << bytes << std::setw(11) << e.algorithm << std::setw(9)
      << (e.protocol.empty() ? "-" : e.protocol) << std::fixed << std::setprecision(2)
      << std::setw(13) << timeUs << std::setw(13) << e.algbwGBps << std::setw(13) << e.busbwGBps
      << std::setw(10)
      << (!e.timeSource.empty()     ? e.timeSource
          : e.latencySource.empty() ? "-"
                                    : e.latencySource)
      << "\n";
  }
  if (auto csv = args.value("csv")) {
    RETURN_IF_ERROR(writeCsvFile(*csv,
                                 {"bytes", "algorithm", "protocol", "time_us", "algbw_gbps",
                                  "busbw_gbps", "ctas", "latency_source"},
                                 rows));
  }
  if (args.has("json")) {
    nlohmann::json out = {{"cluster", cluster.name},
                          {"nodes", layout.nodes},
                          {"gpus_per_node", layout.gpusPerNode},
                          {"world_size", layout.worldSize()},
                          {"nccl_version", cluster.ncclVersion},
                          {"results", rows}};
    if (!timeSource.empty()) out["allreduce_time_source"] = timeSource;
    if (measured.present) {
      out["measured_latency"] = {{"base_us", measured.fit.baseUs},
                                 {"intra_step_us", measured.fit.intraStepUs},
                                 {"inter_step_us", measured.fit.interStepUs},
                                 {"source", measured.source},
                                 {"nccl_era", measured.ncclEra}};
    }
    io.out << out.dump(2) << "\n";
  } else {
    io.out << o.str();
  }
  return Status::ok();
}

namespace {

// The one-line summary of a cluster's description: its title, the text before the first ':'
// ("NVIDIA DGX H100: 8x H100 SXM5 ..." → "NVIDIA DGX H100"), at most 40 characters.
std::string clusterSummary(const std::string& description) {
  std::string title = description.substr(0, description.find(':'));
  if (title.size() > 40) title = title.substr(0, 37) + "...";
  return title;
}

}  // namespace

Status runClusterListCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope cluster list", "[--json]",
                   "Lists the built-in clusters, one line each: GPUs per node, GPU, intra-node\n"
                   "link, NICs x Gb/s per node, NCCL version (- for the alpha-beta model) and a\n"
                   "one-line summary. 'ddpscope cluster show NAME' prints a cluster's full\n"
                   "description, sources and every parameter.");
  parser.flag("json", "machine-readable output");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  nlohmann::json list = nlohmann::json::array();
  std::ostringstream o;
  o << std::left << std::setw(18) << "cluster" << std::right << std::setw(9) << "GPUs/node"
    << "  " << std::left << std::setw(16) << "GPU" << std::setw(15) << "intra-node" << std::setw(14)
    << "NICs x Gb/s" << std::setw(8) << "NCCL"
    << "summary\n";
  for (const std::string& name : sim::builtinClusterNames()) {
    ASSIGN_OR_RETURN(sim::ClusterSpec c, sim::loadBuiltinCluster(name));
    list.push_back({{"name", c.name},
                    {"device", c.device.name},
                    {"gpus_per_node", c.gpusPerNode},
                    {"nics_per_node", c.interNode.nicsPerNode},
                    {"nic_gbps", c.interNode.nicGbps},
                    {"intra_node", std::string(sim::intraNodeLinkName(c.intraNode.type))},
                    {"nccl_version", c.ncclVersion},
                    {"description", c.description}});
    std::ostringstream nics;
    nics << c.interNode.nicsPerNode << " x " << c.interNode.nicGbps;
    o << std::left << std::setw(18) << c.name << std::right << std::setw(9) << c.gpusPerNode << "  "
      << std::left << std::setw(16) << c.device.name << std::setw(15)
      << sim::intraNodeLinkName(c.intraNode.type) << std::setw(14) << nics.str() << std::setw(8)
      << (c.commModel == sim::CommModelKind::kAlphaBeta ? "-" : c.ncclVersion)
      << clusterSummary(c.description) << "\n";
  }
  o << "description and sources: ddpscope cluster show NAME\n";
  io.out << (args.has("json") ? list.dump(2) + "\n" : o.str());
  return Status::ok();
}

}  // namespace ddpscope::cli
