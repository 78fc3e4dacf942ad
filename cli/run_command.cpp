// `ddpscope run --nproc N -- <worker flags>`: launches the runtime worker (ddpscope-run) under
// mpirun on this machine and returns its exit code. Handles what a one-machine launch needs:
// --oversubscribe (more ranks than cores), --bind-to none (ranks float over the cores),
// --allow-run-as-root when running as root (containers, CI), one BLAS thread per rank, and
// idle ranks yielding the CPU. The worker's output goes straight to this process's stdout /
// stderr (the child inherits them).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <thread>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/process.h"

namespace ddpscope::cli {
namespace {

namespace fs = std::filesystem;

ArgParser makeParser() {
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
          "flags.");
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
  ArgParser parser = makeParser();
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(own));
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
  std::vector<ChildEnv> env = {{"OPENBLAS_NUM_THREADS", "1"},  // one BLAS thread per rank
                               {"OMPI_ALLOW_RUN_AS_ROOT", "1", false},
                               {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", false}};
  if (static_cast<unsigned>(nproc) > std::thread::hardware_concurrency()) {
    env.push_back({"OMPI_MCA_mpi_yield_when_idle", "1", false});  // oversubscribed: yield
  }
  ASSIGN_OR_RETURN(const int code, runChildProcess(std::move(command), env));
  if (io.exitCode) *io.exitCode = code;
  return Status::ok();
}

}  // namespace ddpscope::cli
