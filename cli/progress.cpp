#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "base/strings.h"

namespace ddpscope::cli {
namespace {

Nanos delayFromEnvironment() {
  if (const char* text = std::getenv("DDPSCOPE_PROGRESS_DELAY_S")) {
    if (std::optional<double> seconds = parseDouble(text); seconds && *seconds >= 0) {
      return Nanos::fromSecondsDouble(*seconds);
    }
  }
  return Nanos::fromSeconds(2);
}

// "1:05" (minutes:seconds).
std::string clock(Nanos t) {
  const int64_t s = t.count() / 1'000'000'000;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(s / 60),
                static_cast<long long>(s % 60));
  return buf;
}

}  // namespace

Progress::Progress(std::string label, size_t total, std::ostream& err, bool interactive, bool quiet)
    : m_label(std::move(label)),
      m_total(total),
      m_err(err),
      m_interactive(interactive),
      m_quiet(quiet),
      m_start(steadyNow()),
      m_delay(delayFromEnvironment()) {}

Progress Progress::forCommand(std::string label, size_t total, std::ostream& err, bool quiet) {
  const bool terminal = &err == &std::cerr && ::isatty(STDERR_FILENO) == 1;
  return Progress(std::move(label), total, err, terminal, quiet);
}

Progress::~Progress() {
  std::lock_guard<std::mutex> lock(m_mutex);
  finishLine();
}

void Progress::setTotal(size_t total) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_total = total;
}

void Progress::finishLine() {
  if (m_interactive && m_drawn) {
    m_err << "\n";
    m_err.flush();
    m_drawn = false;
  }
}

void Progress::update(size_t done, std::string_view detail) {
  if (m_quiet) return;
  std::lock_guard<std::mutex> lock(m_mutex);
  const Nanos now = steadyNow();
  const Nanos elapsed = now - m_start;
  if (elapsed < m_delay) return;  // quick work prints nothing
  const bool last = done >= m_total;
  if (m_interactive && !last && m_drawn && now - m_lastDraw < Nanos::fromMillis(100)) return;
  m_lastDraw = now;
  const double fraction = m_total ? static_cast<double>(done) / static_cast<double>(m_total) : 1;
  const std::optional<Nanos> eta =
      done ? std::optional<Nanos>(Nanos(static_cast<int64_t>(
                 static_cast<double>(elapsed.count()) / static_cast<double>(done) *
                 static_cast<double>(m_total > done ? m_total - done : 0))))
           : std::nullopt;
  char line[512];
  if (m_interactive) {
    constexpr int kWidth = 20;
    const int filled = static_cast<int>(kWidth * fraction);
    std::snprintf(line, sizeof(line), "\r%s [%s%s] %zu/%zu %3.0f%%  elapsed %s  ETA %s ",
                  m_label.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
                  std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), done, m_total,
                  100 * fraction, clock(elapsed).c_str(), eta ? clock(*eta).c_str() : "?");
    m_err << line;
    m_drawn = true;
    if (last) finishLine();
  } else {
    char etaText[32] = "?";
    if (eta) std::snprintf(etaText, sizeof(etaText), "%.1f s", eta->toSeconds());
    std::snprintf(line, sizeof(line), "%s: %zu/%zu (%.0f%%), elapsed %.1f s, ETA %s%s%s\n",
                  m_label.c_str(), done, m_total, 100 * fraction, elapsed.toSeconds(), etaText,
                  detail.empty() ? "" : ": ", std::string(detail).c_str());
    m_err << line;
  }
  m_err.flush();
}

}  // namespace ddpscope::cli
