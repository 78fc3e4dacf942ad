#include "cli/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace ddpscope::cli {

StatusOr<int> runChildProcess(std::vector<std::string> command, const std::vector<ChildEnv>& env,
                              const std::optional<std::string>& logPath) {
  if (command.empty()) return internalError("runChildProcess: empty command");
  const pid_t pid = ::fork();
  if (pid < 0) return internalError("fork failed: cannot start " + command.front());
  if (pid == 0) {
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
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return internalError("waitpid failed while waiting for " + command.front());
  }
  int code = 1;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
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
