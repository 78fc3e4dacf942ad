// Helpers for tests that launch jobs as child processes (mpirun, `ddpscope run`): run a command
// and capture its output, start one in the background, wait for it with a limit, and find the
// live processes of a job by a marker in their command line (/proc/<pid>/cmdline; zombies have an
// empty one, so they do not count).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace ddpscope::test_util {

// CI runs as root on few cores: allow it for every mpirun this binary starts (ctest sets these
// too; this keeps a manual run working).
inline const bool kEnvironmentReady = [] {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  return true;
}();

struct ProcessRun {
  int exitCode = -1;
  std::string output;  // stdout + stderr
  double seconds = 0;
};

inline ProcessRun run(const std::string& command) {
  ProcessRun r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    r.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// Live processes whose command line contains `marker` (zombies have an empty command line),
// whose argv[0] ends with `program` when given.
inline std::vector<pid_t> processesWith(const std::string& marker,
                                        const std::string& program = "") {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    std::string cmdline;
    try {  // a process that exits between the open and the read fails it (ESRCH): not live
      std::ifstream in(entry.path() / "cmdline", std::ios::binary);
      cmdline.assign(std::istreambuf_iterator<char>(in), {});
    } catch (const std::ios_base::failure&) {
      continue;
    }
    if (cmdline.find(marker) == std::string::npos) continue;
    const std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
    if (!program.empty() && !argv0.ends_with(program)) continue;
    found.push_back(pid);
  }
  return found;
}

// Starts `argv` with stdout and stderr to `logPath`; returns its pid.
inline pid_t spawn(std::vector<std::string> argv, const std::filesystem::path& logPath) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* log = std::fopen(logPath.c_str(), "w");
    if (log) {
      ::dup2(::fileno(log), 1);
      ::dup2(::fileno(log), 2);
    }
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `limitSeconds` for `pid`; its exit code (128 + signal), or -1 if still running.
inline int waitFor(pid_t pid, double limitSeconds) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Waits up to `limitSeconds` until `count` processes match processesWith(marker, program).
inline std::vector<pid_t> waitForProcesses(const std::string& marker, const std::string& program,
                                           size_t count, double limitSeconds) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  std::vector<pid_t> found = processesWith(marker, program);
  while (found.size() < count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    found = processesWith(marker, program);
  }
  return found;
}

// Waits up to `limitSeconds` until process `pid` catches `signal` (its handler is installed:
// /proc/<pid>/status SigCgt); false when it did not in time or is gone.
inline bool waitUntilCatching(pid_t pid, int signal, double limitSeconds) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limitSeconds);
  const std::string statusPath = "/proc/" + std::to_string(pid) + "/status";
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream status(statusPath);
    if (!status) return false;
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("SigCgt:", 0) != 0) continue;
      const unsigned long long caught = std::stoull(line.substr(7), nullptr, 16);
      if (caught & (1ULL << (signal - 1))) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace ddpscope::test_util
