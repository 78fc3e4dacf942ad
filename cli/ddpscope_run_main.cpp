// ddpscope-run: the runtime worker, one MPI rank per process (see run_worker.h for the flags).
// main() owns MPI, the fault paths and the outputs; training is runtime::trainDistributed.
//
// Exit paths: success → 0; bad flags or an output path that cannot be created → 2, before
// training (printed once, by rank 0); an error every rank reaches at the same point (E1, E4/E5,
// bad batch) → every rank prints it and exits 1 after MPI_Finalize; an output that fails while
// written (/dev/full, a full disk) → 1; a communication failure or collective timeout (a dead or
// stopped peer) → the rank prints it, flushes its partial trace and aborts the job (MPI_Abort);
// SIGTERM from mpirun (it kills the survivors when a rank dies or aborts) → the signal thread
// names the collective in flight and flushes the partial trace. Under `ddpscope run`, a non-zero
// code after a completed MPI_Finalize goes to the launcher through DDPSCOPE_RUN_EXIT_DIR and the
// rank exits 0, so mpirun does not wait out its abort grace (cli/rank_exit.h).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

#include "api/buckets_request.h"
#include "api/ddp_flags.h"
#include "cli/rank_exit.h"
#include "cli/run_worker.h"
#include "io/file_output.h"
#include "runtime/fault_guard.h"
#include "runtime/mpi/mpi_communicator.h"
#include "runtime/param_dump.h"
#include "runtime/profiler.h"
#ifdef DDPSCOPE_WITH_NCCL
#include "runtime/nccl/nccl_backend.h"
#endif
#include "traces/args_json.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_writer.h"

namespace ddpscope::cli {

using runtime::Communicator;
using runtime::gatherTimeline;
using runtime::installTerminationSignalGuard;
using runtime::layerNames;
using runtime::limitBlasThreadsToOne;
using runtime::makeMpiCommunicator;
using runtime::measureClockOffset;
using runtime::mergeRankTracks;
using runtime::MpiSession;
using runtime::ParamDump;
using runtime::Profiler;
using runtime::RunSummary;
using runtime::setTerminationHandler;
using runtime::summarize;
using runtime::summaryToJson;
using runtime::trainDistributed;
using runtime::TrainingResult;
using runtime::trainReference;
using runtime::writeParamDump;

namespace {

// The device every rank trains on ("cpu", "cuda:0 (NVIDIA H100 80GB HBM3)"), for the metadata.
std::string& deviceDescription() {
  static std::string description = "cpu";
  return description;
}

traces::Args runMetadata(const WorkerFlags& flags, int world, const std::string& backend) {
  traces::Args meta{{"model", flags.training.model.name},
                    {"world_size", int64_t{world}},
                    {"backend", backend},
                    {"dtype", flags.training.build.dtype},
                    {"device", deviceDescription()},
                    {"global_batch", flags.training.globalBatch},
                    {"iterations", flags.training.iterations},
                    {"warmup", flags.warmup},
                    {"sync_batchnorm", int64_t{flags.training.build.syncBatchNorm}},
                    // What replay / calibrate need to re-simulate the run at its own settings.
                    {"seq_len", flags.training.build.inputs.seqLen},
                    {"image_size", flags.training.build.inputs.imageSize},
                    {"trace_iterations", flags.traceIterations}};
  // The DDP settings under their canonical keys (ddp/ddp_settings.h).
  for (const auto& [key, value] : traces::argsFromJson(ddp::ddpSettingsJson(flags.training.ddp))) {
    meta.append(key, value);
  }
  return meta;
}

// --trace as --trace-format says: the Chrome file at `path`, or one Kineto trace per rank of
// `timeline` at traces::perRankTracePath(flags.tracePath, rank).
Status writeTimeline(const traces::Timeline& timeline, const WorkerFlags& flags,
                     const std::string& path) {
  if (flags.traceFormat != "kineto") return traces::writeChromeTrace(timeline, path);
  for (int r = 0; r < timeline.rankCount(); ++r) {
    RETURN_IF_ERROR(traces::writeKinetoTrace(
        timeline, r, traces::perRankTracePath(flags.tracePath, timeline.rank(r).rank)));
  }
  return Status::ok();
}

// Before any training: every output path can be created (an hour-long run must not end in "cannot
// write"). Opening an io::OutputFile and dropping it unclosed leaves the path untouched. Every
// rank checks (they share the file system here), so every rank fails alike with exit 2.
Status checkOutputPaths(const WorkerFlags& flags) {
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"--trace", flags.tracePath},
        {"--summary", flags.summaryPath},
        {"--dump-params", flags.dumpParamsPath},
        {"--dump-start", flags.dumpStartPath}}) {
    if (path.empty()) continue;
    StatusOr<std::unique_ptr<io::OutputFile>> probe = io::OutputFile::open(path);
    if (!probe.isOk()) return invalidArgument(std::string(flag) + ": " + probe.status().message());
  }
  return Status::ok();
}

// The partial trace of this rank (fault paths): rank 0 writes --trace, others --trace.rank<r>.
void flushPartialTrace(const Profiler& profiler, const WorkerFlags& flags, int rank, int world) {
  if (flags.tracePath.empty()) return;
  const std::string path = flags.traceFormat == "kineto"
                               ? traces::perRankTracePath(flags.tracePath, rank)
                           : rank == 0 ? flags.tracePath
                                       : flags.tracePath + ".rank" + std::to_string(rank);
  traces::Args metadata = runMetadata(flags, world, flags.backend);
  metadata.append("trace_dropped_iterations", profiler.droppedIterations());
  metadata.append("partial", int64_t{1});
  const traces::Timeline timeline = mergeRankTracks({profiler.snapshot()}, std::move(metadata));
  const Status status = writeTimeline(timeline, flags, path);
  std::fprintf(stderr, "ddpscope-run: rank %d: %s partial trace (%zu spans) %s\n", rank,
               status.isOk() ? "wrote its" : "could not write its", timeline.spanCount(),
               status.isOk() ? path.c_str() : status.message().c_str());
  std::fflush(stderr);
}

// --dump-start: records rank 0's initial parameters (at iteration 1, after DDP's broadcast) and
// its first flags.dumpStartBatches batches into `dump`, in that order.
runtime::BatchCallback startRecorder(const WorkerFlags& flags, ParamDump* dump) {
  return [dump, k = flags.dumpStartBatches](int64_t iteration, runtime::TrainableModel& model,
                                            const runtime::Batch& batch) -> Status {
    if (iteration > k) return Status::ok();
    if (iteration == 1) {
      runtime::GradDevice& device = model.device();
      RETURN_IF_ERROR(device.synchronize());
      for (const runtime::Param& p : model.params()) {
        std::vector<float> values(static_cast<size_t>(p.value.numel()));
        RETURN_IF_ERROR(device.toHost(values.data(), p.value.data(), p.value.numel()));
        dump->names.push_back(p.name);
        dump->values.push_back(std::move(values));
      }
    }
    const std::string prefix = "batch" + std::to_string(iteration);
    for (const auto& [suffix, tensor] :
         {std::pair<const char*, const runtime::Tensor*>{".inputs", &batch.inputs},
          {".targets", &batch.targets}}) {
      dump->names.push_back(prefix + suffix);
      dump->values.emplace_back(tensor->data(), tensor->data() + tensor->numel());
    }
    return Status::ok();
  };
}

Status writeOutputs(const WorkerFlags& flags, const traces::Timeline& timeline,
                    const TrainingResult& result, int world, const std::string& backend,
                    const ParamDump* startDump = nullptr) {
  if (!flags.tracePath.empty()) RETURN_IF_ERROR(writeTimeline(timeline, flags, flags.tracePath));
  const RunSummary summary = summarize(timeline, flags.warmup);
  if (!flags.json && !flags.dumpPlan) {
    // Human summary (rank 0): what `--json` carries, in a few lines.
    const ddp::DdpConfig& d = flags.training.ddp;
    char line[256];
    std::cout << flags.training.model.name << ": " << world << " rank(s), backend " << backend
              << ", global batch " << flags.training.globalBatch << ", bucket_cap_mb "
              << d.bucketCapMb << (d.findUnusedParameters ? ", find_unused" : "")
              << (d.staticGraph ? ", static_graph" : "") << ", " << flags.training.iterations
              << " iteration(s), the first " << flags.warmup
              << " left out of the medians as warm-up\n";
    auto row = [&](const char* label, Nanos t) {
      std::snprintf(line, sizeof(line), "  %-22s %12.3f ms\n", label, t.toMillis());
      std::cout << line;
    };
    row("median step", summary.medianStep);
    row("median forward", summary.medianForward);
    row("median backward", summary.medianBackward);
    row("median comm (rank 0)", summary.medianComm);
    row("median exposed comm", summary.medianExposedComm);
    std::snprintf(line, sizeof(line), "  %-22s %12.2f %%   (HTA definition, all ranks)\n",
                  "overlap", summary.overlapPercent);
    std::cout << line;
    for (const auto& r : summary.ranks) {
      std::snprintf(
          line, sizeof(line),
          "    rank %-4d overlap %6.2f %%, exposed comm %.3f ms over the measured iterations\n",
          r.rank, r.overlapPercent, r.exposedComm.toMillis());
      std::cout << line;
    }
    if (!summary.iterations.empty() && summary.iterations.front().index > flags.warmup + 1) {
      std::cout << "  (medians over iterations " << summary.iterations.front().index << "-"
                << summary.iterations.back().index << ": the profiler keeps the last "
                << flags.traceIterations << " iterations; --trace-iterations 0 keeps all)\n";
    }
    if (!flags.tracePath.empty()) {
      std::cout << (flags.traceFormat == "kineto"
                        ? "PyTorch profiler (Kineto) traces written, one per rank, next to "
                        : "trace written to ")
                << flags.tracePath << "\n";
    }
  }
  if (flags.json || !flags.summaryPath.empty()) {
    traces::Args extra = runMetadata(flags, world, backend);
    // Every iteration's loss (rank 0's shard; warm-ups included), for numerics checks.
    nlohmann::json withLosses = nlohmann::json::parse(summaryToJson(summary, extra));
    withLosses["losses"] = result.losses;
    const std::string json = withLosses.dump(2);
    if (!flags.summaryPath.empty()) {
      ASSIGN_OR_RETURN(std::unique_ptr<io::OutputFile> out,
                       io::OutputFile::open(flags.summaryPath));
      out->stream() << json << "\n";
      RETURN_IF_ERROR(out->close().withContext("--summary"));
    }
    if (flags.json) std::cout << json << "\n";
  }
  if (flags.dumpPlan) {
    nlohmann::json plans;
    plans["iteration_1"] =
        ddp::bucketPlanJson(flags.training.model, flags.training.ddp, result.initialPlan, false);
    plans["steady"] =
        ddp::bucketPlanJson(flags.training.model, flags.training.ddp, result.steadyPlan, true);
    plans["rebuilt_at_iteration"] = result.rebuiltAtIteration;
    std::cout << plans.dump(2) << "\n";
  }
  if (!flags.dumpParamsPath.empty()) {
    ParamDump dump;
    for (const auto& p : flags.training.model.params) dump.names.push_back(p.name);
    dump.values = result.params;
    RETURN_IF_ERROR(writeParamDump(flags.dumpParamsPath, dump));
  }
  if (startDump != nullptr && !flags.dumpStartPath.empty()) {
    RETURN_IF_ERROR(writeParamDump(flags.dumpStartPath, *startDump).withContext("--dump-start"));
  }
  std::cout.flush();
  return Status::ok();
}

int runReference(WorkerFlags flags) {
  Profiler profiler(0, layerNames(flags.training.model), [] { return steadyNow(); });
  profiler.setRetainedIterations(flags.traceIterations);
  ParamDump startDump;
  if (!flags.dumpStartPath.empty()) flags.training.onBatch = startRecorder(flags, &startDump);
  StatusOr<TrainingResult> result =
      trainReference(flags.training, 1, flags.training.profile ? &profiler : nullptr);
  if (!result.isOk()) {
    std::fprintf(stderr, "ddpscope-run: error: %s\n", result.status().message().c_str());
    return result.status().exitCode();
  }
  traces::Args metadata = runMetadata(flags, 1, "none (reference)");
  metadata.append("trace_dropped_iterations", profiler.droppedIterations());
  const traces::Timeline timeline = mergeRankTracks({profiler.snapshot()}, std::move(metadata));
  const Status status = writeOutputs(flags, timeline, *result, 1, "none (reference)", &startDump);
  if (!status.isOk()) {
    std::fprintf(stderr, "ddpscope-run: error: %s\n", status.message().c_str());
    return status.exitCode();
  }
  return 0;
}

// --world-size-reference is one process: refused for a world of `world` ranks but 1.
Status checkReferenceWorld(const WorkerFlags& flags, int world) {
  if (!flags.reference || world == 1) return Status::ok();
  return invalidArgument(
      "--world-size-reference runs one process; launch it without mpirun or with -np 1 (got " +
      std::to_string(world) + " ranks)");
}

// --check N: what every rank would refuse before training, for a job of N ranks, without MPI
// (no rank to say it once: this is one process). The refusals below after MPI_Init stay for
// jobs launched by mpirun directly.
int checkWorkerFlags(const WorkerFlags& flags) {
  Status status = checkOutputPaths(flags);
  if (status.isOk()) status = runtime::checkBatch(flags.training.globalBatch, flags.checkRanks);
  if (status.isOk()) status = checkReferenceWorld(flags, static_cast<int>(flags.checkRanks));
  if (status.isOk()) return 0;
  std::fprintf(stderr, "ddpscope-run: error: %s\n", status.message().c_str());
  return status.exitCode();
}

int runWorker(int argc, char** argv) {
  limitBlasThreadsToOne();
  if (std::find(argv + 1, argv + argc, std::string_view("--check")) != argv + argc) {
    StatusOr<WorkerFlags> parsed =
        parseWorkerFlags(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed.isOk()) {
      std::fprintf(stderr, "ddpscope-run: error: %s\n", parsed.status().message().c_str());
      return parsed.status().exitCode();
    }
    // Help is printed by the job itself (the ranks' run after this check).
    if (parsed->help) return 0;
    return checkWorkerFlags(*parsed);
  }
  StatusOr<std::unique_ptr<MpiSession>> session = MpiSession::init(&argc, &argv);
  if (!session.isOk()) {
    std::fprintf(stderr, "ddpscope-run: error: %s\n", session.status().message().c_str());
    return 1;
  }
  // After MPI_Init: OpenMPI installs its own handlers for some signals; ours must win for
  // SIGTERM, which is how mpirun stops the survivors when a rank dies.
  installTerminationSignalGuard();
  const int rank = (*session)->rank();
  const int world = (*session)->worldSize();

  StatusOr<WorkerFlags> parsed = parseWorkerFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!parsed.isOk()) {
    if (rank == 0) {
      std::fprintf(stderr, "ddpscope-run: error: %s\n", parsed.status().message().c_str());
    }
    return parsed.status().exitCode();
  }
  WorkerFlags& flags = *parsed;
  if (flags.help) {
    if (rank == 0) std::cout << flags.helpText;
    return 0;
  }
  if (Status paths = checkOutputPaths(flags); !paths.isOk()) {
    if (rank == 0) std::fprintf(stderr, "ddpscope-run: error: %s\n", paths.message().c_str());
    return paths.exitCode();
  }
  if (flags.reference) {
    if (Status one = checkReferenceWorld(flags, world); !one.isOk()) {
      if (rank == 0) std::fprintf(stderr, "ddpscope-run: error: %s\n", one.message().c_str());
      return one.exitCode();
    }
    return runReference(flags);
  }

  // --backend mpi: the MPI communicator (threaded FIFO) and the CPU model. --backend nccl: the
  // NCCL communicator and the CUDA model on this rank's GPU (nccl_backend.h).
  StatusOr<std::unique_ptr<Communicator>> comm = std::unique_ptr<Communicator>();
#ifdef DDPSCOPE_WITH_NCCL
  std::unique_ptr<runtime::nccl::NcclBackend> ncclBackend;
  if (flags.backend == "nccl") {
    StatusOr<std::unique_ptr<runtime::nccl::NcclBackend>> backend =
        runtime::nccl::makeNcclBackend(**session);
    if (!backend.isOk()) {
      // No device is the same on every rank (bad invocation, exit 2): say it once.
      if (backend.status().code() != StatusCode::kInvalidArgument || rank == 0) {
        std::fprintf(stderr, "ddpscope-run: rank %d: error: %s\n", rank,
                     backend.status().message().c_str());
      }
      return backend.status().exitCode() == 2 ? 2 : 1;
    }
    ncclBackend = std::move(backend).value();
    flags.training.buildModel = ncclBackend->modelFactory();
    deviceDescription() = ncclBackend->deviceName();
    // Declared after ncclBackend: the communicator goes before the CUDA context it uses.
    comm = ncclBackend->takeCommunicator();
  }
#endif
  if (!*comm) comm = makeMpiCommunicator(**session);
  if (!comm.isOk()) {
    std::fprintf(stderr, "ddpscope-run: rank %d: error: %s\n", rank,
                 comm.status().message().c_str());
    return 1;
  }
  (*comm)->setTimeout(flags.commTimeout);
  Profiler profiler(rank, layerNames(flags.training.model), [c = comm->get()] { return c->now(); });
  profiler.setRetainedIterations(flags.traceIterations);
  setTerminationHandler([&profiler, &flags, c = comm->get(), rank, world](int sig) {
    // What this rank was blocked in names the fault: the collective a dead or stopped peer
    // never joined.
    const std::optional<std::string> inFlight = c->inFlight();
    std::string where;
    if (inFlight)
      where = inFlight->empty() ? " with no collective in flight" : " while in the " + *inFlight;
    std::fprintf(stderr,
                 "ddpscope-run: rank %d: terminated by signal %d%s (mpirun ends the job when a "
                 "rank dies, aborts or times out); flushing the trace recorded so far\n",
                 rank, sig, where.c_str());
    flushPartialTrace(profiler, flags, rank, world);
  });
  // Before any return below: the handler refers to the profiler and the communicator.
  struct Detach {
    Communicator* comm;
    ~Detach() {
      setTerminationHandler(nullptr);
      comm->setObserver(nullptr);
    }
  } detach{comm->get()};

  Status status = Status::ok();
  (*comm)->setObserver(nullptr);
  StatusOr<Nanos> offset = measureClockOffset(**comm);
  if (!offset.isOk()) {
    status = offset.status();
  } else {
    profiler.setClockOffset(*offset);
  }
  std::optional<TrainingResult> result;
  ParamDump startDump;
  if (rank == 0 && !flags.dumpStartPath.empty()) {
    flags.training.onBatch = startRecorder(flags, &startDump);
  }
  if (status.isOk()) {
    StatusOr<TrainingResult> trained =
        trainDistributed(**comm, flags.training, flags.training.profile ? &profiler : nullptr);
    status = trained.status();
    if (status.isOk()) result = std::move(trained).value();
  }
  if (status.isOk()) {
    traces::Args metadata = runMetadata(flags, world, flags.backend);
    metadata.append("trace_dropped_iterations", profiler.droppedIterations());
    StatusOr<traces::Timeline> timeline = gatherTimeline(**comm, profiler, std::move(metadata));
    status = timeline.status();
    if (status.isOk() && rank == 0) {
      status = writeOutputs(flags, *timeline, *result, world, flags.backend, &startDump);
      if (!status.isOk()) {
        std::fprintf(stderr, "ddpscope-run: error: %s\n", status.message().c_str());
        return status.exitCode();
      }
    }
  }
  if (status.isOk()) return 0;

  // Bad input is the same on every rank: say it once.
  if (status.code() != StatusCode::kInvalidArgument || rank == 0) {
    std::fprintf(stderr, "ddpscope-run: rank %d: error: %s\n", rank, status.message().c_str());
  }
  std::fflush(stderr);
  flushPartialTrace(profiler, flags, rank, world);
  if (status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kInternal) {
    // A peer is dead or the ranks disagree on the collective sequence: peers may be blocked in
    // a collective forever, so take the whole job down.
    (*comm)->abort(1);
  }
  // Every rank reached this error at the same point (E1, E4/E5): leave cleanly, but never hang
  // in MPI_Finalize if that assumption is wrong.
  std::thread([c = comm->get()] {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::fprintf(stderr, "ddpscope-run: shutdown did not complete in 20 s; aborting\n");
    c->abort(1);
  }).detach();
  return status.exitCode() == 2 ? 2 : 1;
}

}  // namespace
}  // namespace ddpscope::cli

int main(int argc, char** argv) {
  const int code = ddpscope::cli::runWorker(argc, argv);
  // A rank that got through MPI_Finalize with an error: under `ddpscope run` the launcher gets
  // the code without mpirun's abort wait (cli/rank_exit.h).
  return ddpscope::runtime::MpiSession::finalized() ? ddpscope::cli::handOverExitCode(code) : code;
}
