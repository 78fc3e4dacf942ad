#include "runtime/fault_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <thread>

namespace ddpscope::runtime {
namespace {

int g_pipe[2] = {-1, -1};

extern "C" void onTerminationSignal(int sig) {
  const int savedErrno = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(g_pipe[1], &byte, 1);
  errno = savedErrno;
}

std::mutex& handlerMutex() {
  static std::mutex mutex;
  return mutex;
}
std::function<void(int)>& handler() {
  static std::function<void(int)> h;
  return h;
}

}  // namespace

void installTerminationSignalGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(g_pipe, O_CLOEXEC) != 0) {
      std::perror("ddpscope: termination guard: pipe2");
      return;
    }
    std::thread([] {
      unsigned char byte = 0;
      while (read(g_pipe[0], &byte, 1) != 1) {
        if (errno != EINTR) return;
      }
      const int sig = byte;
      std::function<void(int)> h;
      {
        std::lock_guard lock(handlerMutex());
        h = handler();
      }
      if (h) h(sig);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(128 + sig);
    }).detach();
    struct sigaction action = {};
    action.sa_handler = onTerminationSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &action, nullptr);
  });
}

void setTerminationHandler(std::function<void(int)> h) {
  std::lock_guard lock(handlerMutex());
  handler() = std::move(h);
}

}  // namespace ddpscope::runtime
