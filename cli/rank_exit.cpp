#include "cli/rank_exit.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ddpscope::cli {

namespace fs = std::filesystem;

int handOverExitCode(int code) {
  const char* dir = std::getenv(kRankExitDirEnv);
  if (code == 0 || dir == nullptr || *dir == '\0') return code;
  const fs::path path = fs::path(dir) / ("exit." + std::to_string(::getpid()));
  std::ofstream out(path);
  out << code << "\n";
  out.close();
  return out ? 0 : code;
}

StatusOr<std::string> makeRankExitDir() {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  if (ec) return internalError("temporary directory: " + ec.message());
  std::string pattern = (base / "ddpscope-run-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return internalError(pattern + ": cannot create: " + std::strerror(errno));
  }
  return pattern;
}

StatusOr<int> collectRankExits(const std::string& dir) {
  int code = 0;
  Status status = Status::ok();
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    std::ifstream in(entry.path());
    int value = 0;
    std::string rest;
    if (!(in >> value) || value <= 0 || (in >> rest)) {
      status = internalError(entry.path().string() +
                             ": a rank's exit code file does not hold one positive integer");
      break;
    }
    code = std::max(code, value);
  }
  if (ec && status.isOk()) status = internalError(dir + ": cannot list: " + ec.message());
  fs::remove_all(dir, ec);
  if (!status.isOk()) return status;
  return code;
}

}  // namespace ddpscope::cli
