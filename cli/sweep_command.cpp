#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/sim_flags.h"
#include "cli/sim_json.h"
#include "traces/chrome_writer.h"

namespace ddpscope::cli {
namespace {

struct SweepConfig {
  sim::WorldLayout layout;
  double capMb = 25;
  bool findUnused = false;
};

struct SweepRow {
  SweepConfig config;
  Status status;
  sim::SimSummary summary;
};

sim::SimOptions optionsFor(const SimulationRequest& req, const SweepConfig& c) {
  sim::SimOptions o = req.options;
  o.ddp.setBucketCapMb(c.capMb);
  o.ddp.findUnusedParameters = c.findUnused;
  return o;
}

// Runs every configuration on all cores; rows keep the configuration order.
std::vector<SweepRow> runAll(const SimulationRequest& req, const std::vector<SweepConfig>& configs,
                             bool progress) {
  std::vector<SweepRow> rows(configs.size());
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex progressMutex;
  auto worker = [&] {
    while (true) {
      size_t i = next.fetch_add(1);
      if (i >= configs.size()) return;
      sim::SimOptions o = optionsFor(req, configs[i]);
      o.recordTrace = false;
      auto result = runSimulation(req, configs[i].layout, o);
      rows[i].config = configs[i];
      if (result.isOk()) {
        rows[i].summary = std::move(result->summary);
      } else {
        rows[i].status = result.status();
      }
      size_t finished = done.fetch_add(1) + 1;
      if (progress) {
        std::lock_guard<std::mutex> lock(progressMutex);
        int width = 40;
        int filled = static_cast<int>(width * finished / configs.size());
        std::fprintf(stderr, "\r[%s%s] %zu/%zu", std::string(filled, '#').c_str(),
                     std::string(width - filled, ' ').c_str(), finished, configs.size());
        if (finished == configs.size()) std::fprintf(stderr, "\n");
      }
    }
  };
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(configs.size()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return rows;
}

std::string formatMb(double mb) {
  std::ostringstream o;
  o << mb;
  return o.str();
}

}  // namespace

Status runSweepCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope sweep",
      "(--model M | --model-file F) (--cluster C | --cluster-file F)\n"
      "       [--nodes N,... | --world-size W,...] [--bucket-cap-mb X,...] [--find-unused "
      "on|off|both]\n"
      "       [...simulate flags] [--csv PATH] [--json] [--trace PATH]",
      "Simulates every combination of bucket cap, world size and find_unused_parameters (on all\n"
      "cores) and prints a table, then the best bucket_cap_mb per world size and its gain over\n"
      "PyTorch's default of 25.");
  addSimulationFlags(parser, /*sweep=*/true);
  parser.option("csv", "PATH", "write one CSV row per configuration")
      .option("trace", "PATH",
              "write the best configuration's Chrome trace (per world size: PATH-wW.json when "
              "several)")
      .flag("json", "machine-readable output: {\"rows\": [...], \"best\": [...]}")
      .epilog(
          "example: ddpscope sweep --model gpt2-xl --cluster dgx-h100 --nodes 1,2,4,8 \\\n"
          "           --bucket-cap-mb 1,5,25,100 --find-unused both");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(SimulationRequest req, parseSimulationRequest(args, /*sweep=*/true));

  std::vector<double> caps = {1, 2, 5, 10, 25, 50, 100, 200};
  if (auto text = args.value("bucket-cap-mb")) {
    ASSIGN_OR_RETURN(caps, parsePositiveList(*text, "--bucket-cap-mb"));
  }
  std::vector<bool> findUnused = {false};
  if (auto fu = args.value("find-unused")) {
    if (*fu == "on")
      findUnused = {true};
    else if (*fu == "off")
      findUnused = {false};
    else if (*fu == "both")
      findUnused = {false, true};
    else
      return invalidArgument("--find-unused: expected on, off or both, got '" + *fu + "'");
  }
  if (args.has("nodes") && args.has("world-size")) {
    return invalidArgument("give either --nodes or --world-size, not both");
  }
  std::vector<sim::WorldLayout> layouts;
  if (auto text = args.value("world-size")) {
    ASSIGN_OR_RETURN(std::vector<int> sizes, parsePositiveIntList(*text, "--world-size"));
    for (int w : sizes) {
      ASSIGN_OR_RETURN(sim::WorldLayout l, sim::makeWorldLayout(req.cluster, std::nullopt, w));
      layouts.push_back(l);
    }
  } else {
    std::vector<int> nodes = {1};
    if (auto text = args.value("nodes")) {
      ASSIGN_OR_RETURN(nodes, parsePositiveIntList(*text, "--nodes"));
    }
    for (int n : nodes) {
      ASSIGN_OR_RETURN(sim::WorldLayout l, sim::makeWorldLayout(req.cluster, n, std::nullopt));
      layouts.push_back(l);
    }
  }

  // Configurations; the default cap (25) is always simulated for the "gain" column.
  std::vector<SweepConfig> configs;
  for (const auto& layout : layouts) {
    for (bool fu : findUnused) {
      for (double cap : caps) configs.push_back({layout, cap, fu});
    }
  }
  std::vector<SweepConfig> baselines;
  if (std::find(caps.begin(), caps.end(), 25.0) == caps.end()) {
    for (const auto& layout : layouts) {
      for (bool fu : findUnused) baselines.push_back({layout, 25.0, fu});
    }
  }
  std::vector<SweepConfig> all = configs;
  all.insert(all.end(), baselines.begin(), baselines.end());
  bool progress = (&io.err == &std::cerr) && isatty(STDERR_FILENO);
  std::vector<SweepRow> rows = runAll(req, all, progress);
  for (const auto& r : rows) {
    if (!r.status.isOk()) {
      return r.status.withContext("bucket_cap_mb " + formatMb(r.config.capMb) + ", world size " +
                                  std::to_string(r.config.layout.worldSize()));
    }
  }

  // Best per (world size, find_unused), and the gain over cap 25.
  struct Best {
    size_t row;
    size_t baselineRow;
  };
  std::vector<Best> best;
  for (const auto& layout : layouts) {
    for (bool fu : findUnused) {
      std::optional<size_t> bestRow, baseRow;
      for (size_t i = 0; i < rows.size(); ++i) {
        const SweepConfig& c = rows[i].config;
        if (c.layout.worldSize() != layout.worldSize() || c.findUnused != fu) continue;
        if (c.capMb == 25.0 && !baseRow) baseRow = i;
        if (i >= configs.size()) continue;  // baselines are not candidates unless swept
        if (!bestRow || rows[i].summary.stepTime < rows[*bestRow].summary.stepTime) bestRow = i;
      }
      best.push_back({*bestRow, *baseRow});
    }
  }
  auto gainPercent = [&](const Best& b) {
    double base = static_cast<double>(rows[b.baselineRow].summary.stepTime.count());
    double bestNs = static_cast<double>(rows[b.row].summary.stepTime.count());
    return base > 0 ? 100.0 * (base - bestNs) / base : 0.0;
  };

  if (auto path = args.value("csv")) {
    std::ofstream csv(*path);
    if (!csv) return invalidArgument("--csv: cannot write '" + *path + "'");
    csv << "model,cluster,nodes,world_size,bucket_cap_mb,find_unused,step_ms,first_iteration_ms,"
           "forward_ms,backward_ms,comm_ms,exposed_comm_ms,overlap_percent,num_buckets\n";
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto& r = rows[i];
      const auto& s = r.summary;
      csv << req.model.name << "," << req.cluster.name << "," << r.config.layout.nodes << ","
          << r.config.layout.worldSize() << "," << r.config.capMb << ","
          << (r.config.findUnused ? 1 : 0) << "," << s.stepTime.toMillis() << ","
          << s.firstIteration.toMillis() << "," << s.forward.toMillis() << ","
          << s.backward.toMillis() << "," << s.comm.toMillis() << "," << s.exposedComm.toMillis()
          << "," << s.overlapPercent << "," << s.numBuckets << "\n";
    }
    if (!csv) return invalidArgument("--csv: write to '" + *path + "' failed");
  }

  if (auto path = args.value("trace")) {
    for (size_t k = 0; k < best.size(); ++k) {
      const SweepConfig& c = rows[best[k].row].config;
      if (findUnused.size() > 1 && c.findUnused) continue;  // trace the find_unused=off best
      std::string out = *path;
      if (layouts.size() > 1) {
        std::string stem = out;
        std::string ext;
        if (auto dot = out.rfind(".json"); dot != std::string::npos) {
          stem = out.substr(0, dot);
          ext = out.substr(dot);
        }
        out = stem + "-w" + std::to_string(c.layout.worldSize()) + ext;
      }
      sim::SimOptions o = optionsFor(req, c);
      o.recordTrace = true;
      ASSIGN_OR_RETURN(sim::SimResult traced, runSimulation(req, c.layout, o));
      RETURN_IF_ERROR(traces::writeChromeTrace(traced.timeline, out));
      io.err << "trace of the best configuration for world size " << c.layout.worldSize()
             << " written to " << out << "\n";
    }
  }

  if (args.has("json")) {
    nlohmann::json out;
    nlohmann::json jrows = nlohmann::json::array();
    for (size_t i = 0; i < configs.size(); ++i) {
      SimulationRequest r = req;
      r.options = optionsFor(req, rows[i].config);
      nlohmann::json row = simSummaryJson(r, rows[i].config.layout, rows[i].summary);
      row.erase("iterations");
      jrows.push_back(std::move(row));
    }
    nlohmann::json jbest = nlohmann::json::array();
    for (const auto& b : best) {
      const auto& r = rows[b.row];
      jbest.push_back({{"world_size", r.config.layout.worldSize()},
                       {"nodes", r.config.layout.nodes},
                       {"find_unused", r.config.findUnused},
                       {"bucket_cap_mb", r.config.capMb},
                       {"step_time_ns", r.summary.stepTime.count()},
                       {"default_step_time_ns", rows[b.baselineRow].summary.stepTime.count()},
                       {"gain_percent", gainPercent(b)}});
    }
    out["model"] = req.model.name;
    out["cluster"] = req.cluster.name;
    out["rows"] = std::move(jrows);
    out["best"] = std::move(jbest);
    io.out << out.dump(2) << "\n";
    return Status::ok();
  }

  std::ostringstream o;
  o << "sweep: " << req.model.name << " on " << req.cluster.name << ", " << configs.size()
    << " configurations (" << req.options.dtype << ")\n";
  o << std::right << std::setw(6) << "nodes" << std::setw(7) << "world" << std::setw(8) << "cap_MiB"
    << std::setw(7) << "unused" << std::setw(12) << "step_ms" << std::setw(12) << "comm_ms"
    << std::setw(13) << "exposed_ms" << std::setw(11) << "overlap_%" << std::setw(9) << "buckets"
    << "\n";
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& r = rows[i];
    const auto& s = r.summary;
    bool isBest = std::any_of(best.begin(), best.end(), [&](const Best& b) { return b.row == i; });
    o << std::setw(6) << r.config.layout.nodes << std::setw(7) << r.config.layout.worldSize()
      << std::setw(8) << formatMb(r.config.capMb) << std::setw(7)
      << (r.config.findUnused ? "yes" : "no") << std::fixed << std::setprecision(3) << std::setw(12)
      << s.stepTime.toMillis() << std::setw(12) << s.comm.toMillis() << std::setw(13)
      << s.exposedComm.toMillis() << std::setprecision(2) << std::setw(11) << s.overlapPercent
      << std::setw(9) << s.numBuckets << (isBest ? "  *" : "") << "\n";
  }
  o << "\nbest bucket_cap_mb per world size (* above):\n";
  for (const auto& b : best) {
    const auto& r = rows[b.row];
    char line[256];
    std::snprintf(line, sizeof(line),
                  "  world %5d%s: bucket_cap_mb %-5s %10.3f ms/step, %.1f%% %s than 25 "
                  "(%.3f ms)\n",
                  r.config.layout.worldSize(), r.config.findUnused ? " find_unused" : "",
                  formatMb(r.config.capMb).c_str(), r.summary.stepTime.toMillis(),
                  std::abs(gainPercent(b)), gainPercent(b) < 0 ? "slower" : "faster",
                  rows[b.baselineRow].summary.stepTime.toMillis());
    o << line;
  }
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
