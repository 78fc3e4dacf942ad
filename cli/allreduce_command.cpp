#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "api/allreduce_request.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ddpscope::cli {

// Prints the cost model's prediction for one allreduce per size, as nccl-tests reports it.
Status runAllreduceCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope allreduce", "--cluster C [--nodes N | --world-size W] --bytes S[,S...] [--json]",
      "Predicts one allreduce per buffer size with the cluster's collective cost model\n"
      "(NCCL's tuner model for GPU clusters, alpha-beta for CPU/MPI profiles): the chosen\n"
      "algorithm and protocol, time, algbw = S/t and busbw = algbw x 2(n-1)/n (nccl-tests).");
  parser.options(api::allreduceSettingList())
      .flag("json", "machine-readable output")
      .option("csv", "PATH", "also write the table as CSV")
      .epilog("example: ddpscope allreduce --cluster dgx-h100 --nodes 4 --bytes 1M,25M,1G");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const api::AllreduceRequest request, api::parseAllreduceRequest(args));
  ASSIGN_OR_RETURN(const api::AllreduceResult result, api::runAllreduce(request));
  const sim::ClusterSpec& cluster = request.cluster;
  const sim::WorldLayout& layout = request.layout;

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
  const std::string& timeSource = result.timeSource;
  if (!timeSource.empty()) o << "  " << timeSource << "\n";
  o << std::right << std::setw(14) << "bytes" << std::setw(11) << "algorithm" << std::setw(9)
    << "protocol" << std::setw(13) << "time_us" << std::setw(13) << "algbw_GB/s" << std::setw(13)
    << "busbw_GB/s" << std::setw(10) << "latency"
    << "\n";
  for (const api::AllreduceRow& row : result.rows) {
    const sim::CollectiveEstimate& e = row.estimate;
    const double timeUs = e.time.toMicros();
    o << std::setw(14) << row.bytes << std::setw(11) << e.algorithm << std::setw(9)
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
                                 api::allreduceRowsJson(result)));
  }
  if (args.has("json")) {
    const nlohmann::json out = api::allreduceJson(result);
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
  ASSIGN_OR_RETURN(const std::vector<sim::ClusterSpec> clusters, api::builtinClusters());
  const nlohmann::json list = api::clusterListJson(clusters);
  std::ostringstream o;
  o << std::left << std::setw(18) << "cluster" << std::right << std::setw(9) << "GPUs/node"
    << "  " << std::left << std::setw(16) << "GPU" << std::setw(15) << "intra-node" << std::setw(14)
    << "NICs x Gb/s" << std::setw(8) << "NCCL"
    << "summary\n";
  for (size_t i = 0; i < clusters.size(); ++i) {
    const sim::ClusterSpec& c = clusters[i];
    std::ostringstream nics;
    nics << c.interNode.nicsPerNode << " x " << c.interNode.nicGbps;
    o << std::left << std::setw(18) << c.name << std::right << std::setw(9) << c.gpusPerNode << "  "
      << std::left << std::setw(16) << c.device.name << std::setw(15)
      << list[i]["intra_node"].get<std::string>() << std::setw(14) << nics.str() << std::setw(8)
      << (c.commModel == sim::CommModelKind::kAlphaBeta ? "-" : c.ncclVersion)
      << clusterSummary(c.description) << "\n";
  }
  o << "description and sources: ddpscope cluster show NAME\n";
  io.out << (args.has("json") ? list.dump(2) + "\n" : o.str());
  return Status::ok();
}

}  // namespace ddpscope::cli
