// `ddpscope import-torch`: PyTorch profiler (Kineto) traces of a DDP job → a ddpscope trace
// (traces/kineto_import.h) and a summary of buckets, step time and overlap.
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "api/ddp_flags.h"
#include "api/import_request.h"
#include "api/model_settings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress.h"
#include "traces/args_json.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_import.h"
#include "traces/overlap.h"
#include "traces/timeline.h"

namespace ddpscope::cli {
namespace {

std::string bytesText(const std::optional<int64_t>& bytes) {
  if (!bytes) return "unknown (no message size in the trace)";
  std::ostringstream o;
  o << *bytes << " B (" << std::fixed << std::setprecision(3)
    << static_cast<double>(*bytes) / (1024.0 * 1024.0) << " MiB)";
  return o.str();
}

}  // namespace

Status runImportTorchCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser(
      "ddpscope import-torch",
      "TRACE.json[.gz] [MORE_RANK_TRACES...] -o RUN.json [--model M]\n"
      "       [--bucket-cap-mb X] [--batch-per-rank B] [--allow-missing-ranks] [--json]",
      "Imports the PyTorch profiler (Kineto) traces of a DDP job, one file per rank, into a\n"
      "ddpscope trace (lanes compute / comm / ddp / iterations, as `ddpscope run` writes) that\n"
      "opens in ddpscope-gui and feeds `ddpscope overlap`; prints the ranks, iterations, the\n"
      "gradient buckets of each iteration (allreduce bytes in issue order), the median step\n"
      "time, communication, exposed communication and overlap % (HTA definition).\n"
      "With --model (a zoo name or a model file, e.g. from ddpscope.export) the compute spans\n"
      "of CPU traces are named by the model's layers, which `ddpscope replay` / `calibrate`\n"
      "need; a trace of another model is an error. Without --model, a trace profiled with\n"
      "record_shapes=True gives its own model: the parameters from the backward's\n"
      "AccumulateGrad ops (shape, dtype, the order their gradients became ready), the layers\n"
      "from the ddpscope.layer: ranges, else from the forward's ops; it is kept in the output,\n"
      "so replay, calibrate and plan need no --model (a note says why when there is none).\n"
      "GPU traces: the kernels are named by layer through the record_function(\n"
      "\"ddpscope.layer:<module path>\") ranges when each module's forward ran in one, else\n"
      "through the host ops that launched them (backward kernels through the autograd sequence\n"
      "numbers); the host facts of the first rank's profiled steps are then kept too (what\n"
      "replay's host lane needs).\n"
      "Message sizes: a trace profiled without record_shapes carries none. Then, with the\n"
      "model, each iteration's bucket allreduces take the bytes of the model's bucket plan\n"
      "(ddpscope buckets, with the DDP flags given here: pass the job's --bucket-cap-mb etc.);\n"
      "their count must equal the plan's buckets. Without the model the bytes are reported as\n"
      "unknown (JSON null), and replay / calibrate refuse to fit to them.");
  parser.positionalList("TRACE.json", "per-rank profiler traces (plain or .gz), any order", true)
      .options(api::importTorchOutputSettingList())
      .flag("json", "machine-readable summary (times in ns)")
      .flag("quiet", "no progress on stderr (shown when reading the traces takes more than 2 s)");
  parser.options(api::modelSettingList());
  // The job's DDP settings, which the profiler does not record: written to the trace (the keys
  // replay and calibrate read) when any is given.
  parser.options(api::ddpSettingList(api::DdpSettingSet::all()));
  parser.epilog(
      "Example:\n"
      "  ddpscope import-torch rank0.json.gz rank1.json.gz -o run.json\n"
      "  ddpscope import-torch r0.json.gz r1.json.gz -o run.json --model m.json \\\n"
      "      --bucket-cap-mb 25 --batch-per-rank 32\n"
      "Traces come from torch.profiler.profile(...) (record_shapes=True records message sizes)\n"
      "with prof.step() called every iteration and export_chrome_trace() on every rank.");
  parser.shortAlias("-o", "out");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  const std::vector<std::string>& tracePaths = args.positionals();
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  Progress progress =
      Progress::forCommand("import-torch", tracePaths.size(), io.err, args.has("quiet"));
  ASSIGN_OR_RETURN(const api::TorchImport imported,
                   api::importTorchTraces(
                       tracePaths, args, [&progress](size_t done, size_t, const std::string& path) {
                         progress.update(done, path);
                       }));
  if (args.has("json")) {
    io.out << api::importTorchJson(imported).dump(2) << "\n";
    return Status::ok();
  }
  const traces::KinetoImportReport& report = imported.report;
  const traces::KinetoImportSummary& summary = imported.summary;
  const std::string& output = imported.output;

  std::ostringstream o;
  o << "imported " << report.ranks.size() << " rank(s) of world size " << report.worldSize << ", "
    << summary.iterationCount << " iteration(s) → " << output << "\n";
  o << "buckets per iteration (allreduce issue order): " << summary.bucketBytes.size()
    << (summary.bucketsConsistent ? "" : "  (differs between iterations: see --json)") << "\n";
  for (size_t b = 0; b < summary.bucketBytes.size(); ++b) {
    o << "  bucket " << b << ": " << bytesText(summary.bucketBytes[b]) << "\n";
  }
  o << std::fixed << std::setprecision(3);
  o << "median step:         " << summary.medianStep.toMillis() << " ms (slowest rank)\n";
  o << "median comm:         " << summary.medianComm.toMillis() << " ms (rank "
    << (report.ranks.empty() ? 0 : report.ranks.front()) << ")\n";
  o << "median exposed comm: " << summary.medianExposedComm.toMillis() << " ms\n";
  o << std::setprecision(2) << "overlap:             " << summary.overlapPercent
    << " % of communication hidden behind compute (imported lanes, every iteration)\n";
  o << "HTA overlap:        ";
  bool anyGpuComm = false;
  for (const auto& [rank, stats] : report.htaOverlap) {
    anyGpuComm = anyGpuComm || stats.hasCommunication;
    o << (rank == report.htaOverlap.begin()->first ? " rank " : ", rank ") << rank << " "
      << traces::formatPercent(stats) << (stats.hasCommunication ? " %" : "");
  }
  o << (anyGpuComm ? "  (= `ddpscope overlap` on each file = HTA's get_comm_comp_overlap)\n"
                   : "  (no GPU communication kernels: HTA reads GPU kernels only)\n");
  for (const auto& note : report.notes) o << "note: " << note << "\n";
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
