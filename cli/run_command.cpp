// `ddpscope run --nproc N -- <worker flags>`: launches the runtime worker (ddpscope-run) under
// mpirun on this machine and returns its exit code. Handles what a one-machine launch needs:
// --oversubscribe (more ranks than cores), --bind-to none (ranks float over the cores),
// --allow-run-as-root when running as root (containers, CI), one BLAS thread per rank, and
// idle ranks yielding the CPU. A rank that ends cleanly with an error hands its exit code over
// through a scratch directory, so the command returns without mpirun's abort wait (rank_exit.h).
// The worker's output goes straight to this process's stdout /
// stderr (the child inherits them). No process outlives the command: SIGINT / SIGTERM / SIGHUP
// are forwarded to mpirun as SIGTERM (SIGKILL after a grace period), and any rank left behind
// (one that was stopped, one whose mpirun died) is SIGKILLed when mpirun has exited (process.h).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/process.h"
#include "cli/rank_exit.h"

namespace ddpscope::cli {
namespace {

namespace fs = std::filesystem;

ArgParser makeRunParser() {
  ArgParser parser("ddpscope run",
                   "--nproc N [--mpirun PATH] [--worker PATH] -- <ddpscope-run flags>",
                   "Trains a model with the real DDP runtime on this machine: N MPI ranks of\n"
                   "ddpscope-run (found next to this ddpscope binary) under mpirun.");
  parser.option("nproc", "N", "number of ranks (processes)")
      .option("mpirun", "PATH",
              "the mpirun to use (default: the one found at build time, else PATH)")
      .option("worker", "PATH", "the ddpscope-run binary (default: next to ddpscope)")
      .flag("dry-run", "print the command line instead of running it")
      .epilog(
          "example: ddpscope run --nproc 2 -- --model mlp-wide --batch 64 --iterations 20 "
          "--trace trace.json --json\n"
          "GPUs: ddpscope run --nproc 2 -- --model gpt2-small --backend nccl --dtype bf16 (one\n"
          "GPU per rank; every worker flag, --backend and --dtype included, is passed through).\n"
          "Run 'ddpscope-run --help' (or 'ddpscope run --nproc 1 -- --help') for the worker's "
          "flags.\n"
          "Bad worker flags and output paths that cannot be created are refused before mpirun\n"
          "starts (one 'ddpscope-run --check N' process, exit 2).\n"
          "Faults: a rank that dies or stops (SIGSTOP) makes the others fail within the worker's\n"
          "--comm-timeout-s, naming the collective, bucket and iteration, and flush their partial\n"
          "traces; SIGINT / SIGTERM to this command stop mpirun and its ranks (SIGKILL after " +
          std::to_string(kTerminationGraceSeconds) +
          " s);\nno process of the job outlives this command, and after a fault or a signal its "
          "exit\n"
          "code is non-zero.");
  return parser;
}

bool isExecutable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::optional<fs::path> searchPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = dirs.find(':', start);
    const std::string dir =
        dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && isExecutable(fs::path(dir) / name)) return fs::path(dir) / name;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return std::nullopt;
}

StatusOr<fs::path> findWorker(const ParsedArgs& args) {
  if (auto worker = args.value("worker")) {
    if (!isExecutable(*worker)) return notFound("--worker: '" + *worker + "' is not an executable");
    return fs::path(*worker);
  }
  if (StatusOr<std::string> self = selfExecutable(); self.isOk()) {
    const fs::path candidate = fs::path(*self).parent_path() / "ddpscope-run";
    if (isExecutable(candidate)) return candidate;
  }
  if (auto found = searchPath("ddpscope-run")) return *found;
  return notFound(
      "ddpscope-run not found next to ddpscope or in PATH (it is built only when MPI is found: "
      "Debian: libopenmpi-dev openmpi-bin); give it with --worker PATH");
}

StatusOr<fs::path> findMpirun(const ParsedArgs& args) {
  if (auto mpirun = args.value("mpirun")) {
    if (!isExecutable(*mpirun)) return notFound("--mpirun: '" + *mpirun + "' is not an executable");
    return fs::path(*mpirun);
  }
#ifdef DDPSCOPE_MPIEXEC
  if (isExecutable(DDPSCOPE_MPIEXEC)) return fs::path(DDPSCOPE_MPIEXEC);
#endif
  for (const char* name : {"mpirun", "mpiexec"}) {
    if (auto found = searchPath(name)) return *found;
  }
  return notFound("mpirun not found (Debian: openmpi-bin); give it with --mpirun PATH");
}

}  // namespace

Status runRunCommand(const std::vector<std::string>& argv, CommandIo io) {
  // Everything after "--" belongs to the worker.
  std::vector<std::string> own;
  std::vector<std::string> workerArgs;
  bool afterSeparator = false;
  for (const std::string& a : argv) {
    if (!afterSeparator && a == "--") {
      afterSeparator = true;
    } else {
      (afterSeparator ? workerArgs : own).push_back(a);
    }
  }
  ArgParser parser = makeRunParser();
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(own, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  if (!args.has("nproc")) return invalidArgument("--nproc: required (the number of ranks)");
  ASSIGN_OR_RETURN(int64_t nproc, args.positiveInt("nproc", 1));
  if (!args.positionals().empty()) {
    return invalidArgument("unexpected argument '" + args.positionals().front() +
                           "' (worker flags go after '--')");
  }
  ASSIGN_OR_RETURN(fs::path worker, findWorker(args));
  ASSIGN_OR_RETURN(fs::path mpirun, findMpirun(args));

  std::vector<std::string> command = {mpirun.string(),   "-np",       std::to_string(nproc),
                                      "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) command.push_back("--allow-run-as-root");
  command.push_back(worker.string());
  command.insert(command.end(), workerArgs.begin(), workerArgs.end());

  if (args.has("dry-run")) {
    for (size_t i = 0; i < command.size(); ++i) io.out << (i ? " " : "") << command[i];
    io.out << "\n";
    return Status::ok();
  }
  io.out.flush();
  io.err.flush();
  std::vector<ChildEnv> env = {
      {"OPENBLAS_NUM_THREADS", "1"},  // one BLAS thread per rank
      {"OMPI_ALLOW_RUN_AS_ROOT", "1", false},
      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", false},
      // mpirun SIGKILLs a rank this long after its SIGTERM (OpenMPI's
      // default, 1 s, cut rank 0's trace flush short on a loaded host).
      {"OMPI_MCA_odls_base_sigkill_timeout", std::to_string(kRankFlushGraceSeconds), false}};
  if (static_cast<unsigned>(nproc) > std::thread::hardware_concurrency()) {
    env.push_back({"OMPI_MCA_mpi_yield_when_idle", "1", false});  // oversubscribed: yield
  }
  // Bad input fails alike on every rank; found by one worker process without MPI it fails at
  // once (through mpirun, a rank's exit 2 costs the kill grace of every other rank, ~10 s).
  std::vector<std::string> check = {worker.string(), "--check", std::to_string(nproc)};
  check.insert(check.end(), workerArgs.begin(), workerArgs.end());
  ASSIGN_OR_RETURN(int checked, runChildProcess(std::move(check), env));
  if (checked != 0) {
    if (io.exitCode) *io.exitCode = checked;
    return Status::ok();
  }
  // Ranks that leave cleanly with an error hand their code over here (rank_exit.h).
  ASSIGN_OR_RETURN(const std::string exitDir, makeRankExitDir());
  env.push_back({kRankExitDirEnv, exitDir});
  ChildReport report;
  StatusOr<int> launched = runChildProcess(std::move(command), env, std::nullopt, &report);
  StatusOr<int> handedOver = collectRankExits(exitDir);
  if (!launched.isOk()) return launched.status();
  if (!handedOver.isOk()) return handedOver.status();
  int code = *launched != 0 ? *launched : *handedOver;
  if (report.terminationSignal != 0) {
    // Ctrl-C or a kill of this launcher: mpirun got SIGTERM and stopped its ranks (each
    // flushes its partial trace); whatever outlived it was SIGKILLed (process.h).
    io.err << "ddpscope run: interrupted by SIG" << sigabbrev_np(report.terminationSignal)
           << ": stopped mpirun and its ranks"
           << (report.childKilled ? " (mpirun outlived the grace period: SIGKILL)" : "") << "\n";
    code = 128 + report.terminationSignal;
  }
  if (!report.strayPids.empty()) {
    io.err << "ddpscope run: killed " << report.strayPids.size()
           << " process(es) the job left behind (SIGKILL; a stopped rank cannot end otherwise):";
    for (int pid : report.strayPids) io.err << " " << pid;
    io.err << "\n";
    if (code == 0) code = 1;
  }
  io.err.flush();
  if (io.exitCode) *io.exitCode = code;
  return Status::ok();
}

}  // namespace ddpscope::cli
