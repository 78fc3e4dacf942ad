// Progress of long work (validate, sweeps, all-ranks simulations, imports, calibration) on the
// error stream, so that stdout stays the result.
//
// On a terminal one line is redrawn in place, at most 10 times a second:
//   sweep [##########          ]  96/192  50%  elapsed 0:02  ETA 0:02
// Elsewhere (a pipe, a log file, CI) one plain line per step, which a log keeps readable:
//   sweep: 96/192 (50%), elapsed 2.1 s, ETA 2.1 s
// Nothing is printed with --quiet, nor before the work has run for the delay (2 s; the
// environment variable DDPSCOPE_PROGRESS_DELAY_S overrides it, tests set 0), so quick work
// prints nothing. ETA = elapsed / done × (total − done). update() may be called from several
// threads.
//
// No C++ progress-bar library is packaged in Debian 12 (the project's dependency list), so this
// small one is ours.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <mutex>
#include <string>
#include <string_view>

#include "base/nanos.h"

namespace ddpscope::cli {

class Progress {
 public:
  // `interactive`: the stream is a terminal (redraw in place). `quiet`: print nothing.
  Progress(std::string label, size_t total, std::ostream& err, bool interactive, bool quiet);
  // For a command's CommandIo error stream: interactive iff it is std::cerr on a terminal.
  static Progress forCommand(std::string label, size_t total, std::ostream& err, bool quiet);
  ~Progress();

  // `done` of `total` steps finished; `detail` names the last one (a configuration, a file).
  void update(size_t done, std::string_view detail = {});
  void setTotal(size_t total);

 private:
  void finishLine();

  std::string m_label;
  size_t m_total;
  std::ostream& m_err;
  bool m_interactive;
  bool m_quiet;
  Nanos m_start;
  Nanos m_delay;
  Nanos m_lastDraw;
  bool m_drawn = false;
  std::mutex m_mutex;
};

}  // namespace ddpscope::cli
