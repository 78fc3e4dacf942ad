#include "cli/run_worker.h"

#include <iostream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "api/ddp_flags.h"
#include "api/model_request.h"
#include "api/model_settings.h"
#include "cli/arg_parser.h"

namespace ddpscope::cli {
namespace {

// Every DDP setting but those the runtime's Engine does not implement: the communication hook,
// and PyTorch 2.15's skip_all_reduce_unused_params and mixed_precision. (batched_grad_copy runs
// as the same copies issued when the bucket is ready; lazy_bucket_allocation changes nothing.)
// --autocast describes PyTorch's autograd, not the runtime's (its --dtype sets the precision).
api::DdpSettingSet workerDdpSettings() {
  return api::DdpSettingSet::all()
      .without(api::DdpSetting::kCommHook)
      .without(api::DdpSetting::kSkipAllReduceUnused)
      .without(api::DdpSetting::kMixedPrecision)
      .without(api::DdpSetting::kAutocast);
}

ArgParser makeWorkerParser() {
  ArgParser parser(
      "ddpscope-run",
      "--model NAME|SHORTHAND [--backend mpi|nccl] [--dtype D] [--batch B] [--iterations N] "
      "[--warmup W] [DDP flags] [--trace PATH] [--json]",
      "The ddpscope runtime worker: trains a model with PyTorch DDP semantics, one MPI rank per\n"
      "process, and records every rank's timeline. --backend mpi trains the CPU model and\n"
      "synchronizes with MPI; --backend nccl trains the CUDA model on one GPU per rank (GPU =\n"
      "the rank's node-local rank) and synchronizes with NCCL on a separate stream. Launch it\n"
      "with\n"
      "  mpirun -np N ddpscope-run ...   or   ddpscope run --nproc N -- ...");
  parser.options(api::modelSettingList())
      .option("backend", "mpi|nccl",
              "mpi: CPU model + MPI (default); nccl: CUDA model + NCCL, one GPU per rank")
      .option("dtype", "fp32|tf32|bf16",
              "matrix-product precision (default fp32; tf32 and bf16 need --backend nccl; "
              "parameters, gradients and buckets stay fp32)")
      .option("iterations", "N", "measured iterations after the warm-up (default 10)")
      .option("warmup", "W",
              "warm-up iterations, run first and left out of the summary (default 0)")
      .option("batch", "B", "GLOBAL batch; each of the N ranks trains on B/N samples (default 8)");
  parser.options(api::ddpSettingList(workerDdpSettings()));
  parser.flag("sync-batchnorm", "convert BatchNorm2d to SyncBatchNorm")
      .option("seed", "S", "parameter init and data seed (default 1)")
      .option("lr", "LR", "SGD learning rate (default 0.01)")
      .option("momentum", "M", "SGD momentum (default 0)")
      .option("seq-len", "T", "tokens per sample for transformers (default: the model's)")
      .option("image-size", "PX", "image side for vision models (default: the model's)")
      .option("trace", "PATH",
              "merged Chrome trace of all ranks (pid = rank), written by rank 0 (a path that "
              "cannot be created fails before training; the file appears only once complete)")
      .option("trace-format", "chrome|kineto",
              "chrome (default): that one file; kineto: PyTorch profiler traces, one per rank "
              "(PATH with .rankN before .json), as HTA's TraceAnalysis reads them")
      .option("trace-iterations", "K",
              "the profiler is a ring buffer: it keeps the spans of the last K iterations "
              "(default " +
                  std::to_string(kDefaultTraceIterations) +
                  "; 0 keeps all), so memory and the trace stay bounded on long runs; the "
                  "summary's medians cover those K")
      .option("summary", "PATH", "summary JSON (step, forward, backward, comm, overlap)")
      .flag("json", "print the summary JSON on stdout (rank 0)")
      .option("dump-params", "PATH", "rank 0 writes the final parameters (binary)")
      .option("dump-start", "PATH",
              "rank 0 writes the initial parameters and its first batches (binary, as "
              "--dump-params: parameters by name, then batch<i>.inputs / batch<i>.targets), to "
              "check the numerics against PyTorch; the summary carries every iteration's loss")
      .option("dump-start-batches", "K", "batches --dump-start records (default 2)")
      .flag("dump-plan", "print the iteration-1 and steady bucket plans as JSON (rank 0)")
      .flag("world-size-reference",
            "run the single-process reference instead: one process, batch B, no DDP")
      .option("comm-timeout-s", "S", "fail a collective that takes longer (default 60)")
      .option(
          "check", "N",
          "check the flags and output paths for a job of N ranks, then exit without "
          "training or MPI (ddpscope run does this before it starts mpirun; with --help it prints "
          "nothing)")
      .flag("no-profile", "do not record spans")
      .option("fault-kill-rank", "R", "test only: rank R exits with code 9 ...")
      .option("fault-kill-iteration", "I", "test only: ... at the start of iteration I")
      .option("fault-stop-rank", "R", "test only: rank R stops itself with SIGSTOP ...")
      .option("fault-stop-iteration", "I", "test only: ... at the start of iteration I");
  return parser;
}

// --fault-<kind>-rank R and --fault-<kind>-iteration I (both or neither): {R, I}, or {-1, 0}.
StatusOr<std::pair<int, int64_t>> parseFault(const ParsedArgs& args, const std::string& kind) {
  const std::string rankFlag = "fault-" + kind + "-rank";
  const std::string iterationFlag = "fault-" + kind + "-iteration";
  if (args.has(rankFlag) != args.has(iterationFlag)) {
    return invalidArgument("--" + rankFlag + " and --" + iterationFlag + " go together");
  }
  ASSIGN_OR_RETURN(int64_t rank, args.nonNegativeInt(rankFlag, -1));
  ASSIGN_OR_RETURN(int64_t iteration, args.nonNegativeInt(iterationFlag, 0));
  return std::pair<int, int64_t>(static_cast<int>(rank), iteration);
}

}  // namespace

StatusOr<WorkerFlags> parseWorkerFlags(const std::vector<std::string>& argv) {
  const ArgParser parser = makeWorkerParser();
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, std::cerr));
  WorkerFlags flags;
  if (args.helpRequested()) {
    flags.help = true;
    flags.helpText = parser.helpText();
    return flags;
  }
  if (!args.positionals().empty()) {
    return invalidArgument("unexpected argument '" + args.positionals().front() + "'");
  }
  const std::string backend = args.value("backend").value_or("mpi");
  if (backend != "mpi" && backend != "nccl") {
    return invalidArgument("--backend: expected mpi or nccl, got '" + backend + "'");
  }
#ifndef DDPSCOPE_WITH_NCCL
  if (backend == "nccl") {
    // A flag value this build cannot honour is bad input (exit 2), like an unknown one.
    return invalidArgument(
        "--backend nccl: this ddpscope-run was not built with CUDA/NCCL (the CPU runtime "
        "supports --backend mpi)");
  }
#endif
  flags.backend = backend;
  const std::string dtype = args.value("dtype").value_or("fp32");
  if (dtype != "fp32" && dtype != "tf32" && dtype != "bf16") {
    return invalidArgument("--dtype: expected fp32, tf32 or bf16, got '" + dtype + "'");
  }
  if (dtype != "fp32" && backend == "mpi") {
    return invalidArgument("--dtype " + dtype +
                           ": the CPU model (--backend mpi) computes in fp32 only; tf32 and bf16 "
                           "need --backend nccl");
  }
  flags.training.build.dtype = dtype;
  auto model = args.value("model");
  if (!model) return invalidArgument("--model: required (a zoo name or a shorthand)");
  flags.modelText = *model;
  ASSIGN_OR_RETURN(flags.training.model, models::resolveModel(*model));

  runtime::TrainingOptions& t = flags.training;
  ASSIGN_OR_RETURN(int64_t iterations, args.nonNegativeInt("iterations", 10));
  ASSIGN_OR_RETURN(flags.warmup, args.nonNegativeInt("warmup", 0));
  t.iterations = iterations + flags.warmup;
  if (t.iterations == 0) return invalidArgument("--iterations: nothing to run (0 iterations)");
  ASSIGN_OR_RETURN(t.globalBatch, args.positiveInt("batch", 8));
  ASSIGN_OR_RETURN(t.ddp, api::parseDdpSettings(args, workerDdpSettings()));
  t.build.syncBatchNorm = args.has("sync-batchnorm");
  ASSIGN_OR_RETURN(int64_t seed, args.nonNegativeInt("seed", 1));
  t.build.seed = static_cast<uint64_t>(seed);
  t.dataSeed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(t.learningRate, args.nonNegativeDouble("lr", 0.01));
  ASSIGN_OR_RETURN(t.momentum, args.nonNegativeDouble("momentum", 0.0));
  ASSIGN_OR_RETURN(t.build.inputs.seqLen, args.positiveInt("seq-len", 0));
  ASSIGN_OR_RETURN(t.build.inputs.imageSize, args.positiveInt("image-size", 0));
  t.profile = !args.has("no-profile");

  flags.tracePath = args.value("trace").value_or("");
  flags.traceFormat = args.value("trace-format").value_or("chrome");
  if (flags.traceFormat != "chrome" && flags.traceFormat != "kineto") {
    return invalidArgument("--trace-format: expected chrome or kineto, got '" + flags.traceFormat +
                           "'");
  }
  if (args.has("trace-format") && flags.tracePath.empty()) {
    return invalidArgument("--trace-format needs --trace PATH");
  }
  ASSIGN_OR_RETURN(flags.traceIterations,
                   args.nonNegativeInt("trace-iterations", kDefaultTraceIterations));
  flags.summaryPath = args.value("summary").value_or("");
  flags.dumpParamsPath = args.value("dump-params").value_or("");
  flags.dumpStartPath = args.value("dump-start").value_or("");
  ASSIGN_OR_RETURN(flags.dumpStartBatches, args.positiveInt("dump-start-batches", 2));
  if (args.has("dump-start-batches") && flags.dumpStartPath.empty()) {
    return invalidArgument("--dump-start-batches: only with --dump-start PATH");
  }
  flags.json = args.has("json");
  flags.dumpPlan = args.has("dump-plan");
  flags.reference = args.has("world-size-reference");
  ASSIGN_OR_RETURN(flags.checkRanks, args.positiveInt("check", 0));
  ASSIGN_OR_RETURN(double timeoutS, args.positiveDouble("comm-timeout-s", 60.0));
  flags.commTimeout = Nanos::fromSecondsDouble(timeoutS);
  ASSIGN_OR_RETURN(std::tie(t.faultKillRank, t.faultKillIteration), parseFault(args, "kill"));
  ASSIGN_OR_RETURN(std::tie(t.faultStopRank, t.faultStopIteration), parseFault(args, "stop"));
  return flags;
}

}  // namespace ddpscope::cli
