#include "cli/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace ddpscope::cli {
namespace {

struct Child {
  pid_t pid;
  bool zombie;  // already exited, waiting to be reaped: not left behind
};

// The processes whose parent is this process (from /proc/<pid>/stat: "pid (comm) state ppid").
std::vector<Child> childrenOfThisProcess() {
  std::vector<Child> children;
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0) continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');  // comm may hold spaces and parentheses
    if (close == std::string::npos || close + 4 >= line.size()) continue;
    const long ppid = std::strtol(line.c_str() + close + 4, nullptr, 10);
    if (ppid == self) children.push_back({static_cast<pid_t>(pid), line[close + 2] == 'Z'});
  }
  ::closedir(proc);
  return children;
}

// SIGKILLs and reaps every process re-parented here, until none is left (killing one may
// re-parent its own children here); `killed` gets those that were still alive.
void killStrays(std::vector<int>* killed) {
  for (int round = 0; round < 100; ++round) {
    const std::vector<Child> strays = childrenOfThisProcess();
    if (strays.empty()) return;
    for (const Child& child : strays) {
      if (!child.zombie) {
        ::kill(child.pid, SIGKILL);
        killed->push_back(static_cast<int>(child.pid));
      }
      while (::waitpid(child.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

StatusOr<int> runChildProcess(std::vector<std::string> command, const std::vector<ChildEnv>& env,
                              const std::optional<std::string>& logPath, ChildReport* report) {
  if (command.empty()) return internalError("runChildProcess: empty command");
  ChildReport localReport;
  ChildReport& r = report ? *report : localReport;
  r = ChildReport{};
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t waitSet;
  sigemptyset(&waitSet);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&waitSet, sig);
  sigset_t previousMask;
  pthread_sigmask(SIG_BLOCK, &waitSet, &previousMask);
  struct RestoreMask {
    const sigset_t* mask;
    ~RestoreMask() { pthread_sigmask(SIG_SETMASK, mask, nullptr); }
  } restore{&previousMask};

  const pid_t pid = ::fork();
  if (pid < 0) return internalError("fork failed: cannot start " + command.front());
  if (pid == 0) {
    pthread_sigmask(SIG_SETMASK, &previousMask, nullptr);  // a blocked mask survives exec
    for (const ChildEnv& e : env) ::setenv(e.name.c_str(), e.value.c_str(), e.overwrite ? 1 : 0);
    if (logPath) {
      const int fd = ::open(logPath->c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
    }
    std::vector<char*> argv;
    for (std::string& s : command) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }

  using Clock = std::chrono::steady_clock;
  Clock::time_point killAt = Clock::time_point::max();
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      return internalError("waitpid failed while waiting for " + command.front());
    }
    if (Clock::now() >= killAt && !r.childKilled) {
      ::kill(pid, SIGKILL);
      r.childKilled = true;
    }
    // SIGCHLD wakes the wait; the timeout only bounds it (signals of a kind coalesce).
    const timespec timeout = {0, 200'000'000};
    const int sig = ::sigtimedwait(&waitSet, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (r.terminationSignal == 0) {
        r.terminationSignal = sig;
        ::kill(pid, SIGTERM);
        killAt = Clock::now() + std::chrono::seconds(kTerminationGraceSeconds);
      } else {
        killAt = Clock::now();  // asked twice: no more grace
      }
    }
  }
  killStrays(&r.strayPids);
  const int code = exitCodeOf(status);
  if (r.terminationSignal != 0 && report == nullptr) {
    return unavailable(std::string("interrupted by SIG") + sigabbrev_np(r.terminationSignal) +
                       " while running " + command.front() + " (stopped it, exit code " +
                       std::to_string(code) + ")");
  }
  if (code == 127) return internalError("could not execute " + command.front());
  return code;
}

StatusOr<std::string> selfExecutable() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return internalError("cannot find this executable (/proc/self/exe)");
  return self.string();
}

}  // namespace ddpscope::cli
