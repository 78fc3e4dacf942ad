#include "gui/widgets/app_main.h"

#include <QApplication>
#include <QEventLoop>
#include <QTextStream>
#include <QTimer>
#include <cstdio>

#include "gui/widgets/main_window.h"
#include "gui/widgets/panels.h"
#include "gui/widgets/sweep_panel.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/whatif_panel.h"

namespace ddpscope::gui {

namespace {

void printUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: ddpscope-gui [PATH...] [--compare] [--tab "
      "timeline|overlap|compare|whatif|sweep|tuning]\n"
      "                    [--iteration N] [--size WxH] [--screenshot OUT.png|OUT.svg]\n"
      "Opens Chrome/Perfetto traces written by `ddpscope simulate --trace`, `ddpscope-run`\n"
      "and the PyTorch profiler (Kineto). A directory (its *.json, *.json.gz files) or several\n"
      "per-rank PyTorch profiler traces open as one multi-rank run; `FILE FILE_B` compares\n"
      "FILE_B against FILE. A report of ddpscope.torch.tune opens in the Tuning tab.\n"
      "Traces of more than 1000 MB of JSON (a .json.gz by its uncompressed size) are refused\n"
      "with a message before they are read: opening takes ~4x the JSON size in memory. Set\n"
      "DDPSCOPE_GUI_MAX_TRACE_MB=MB to change the limit.\n");
}

// Runs the event loop until `signal` fires or `timeoutMs` passes.
template <typename Sender, typename Signal>
void waitFor(Sender* sender, Signal signal, int timeoutMs) {
  QEventLoop loop;
  QObject::connect(sender, signal, &loop, &QEventLoop::quit);
  QTimer::singleShot(timeoutMs, &loop, &QEventLoop::quit);
  loop.exec();
}

}  // namespace

int runGuiApp(const QStringList& arguments) {
  QStringList paths;
  QString screenshot;
  QString tab;
  QSize size(1500, 900);
  bool compare = false;
  long iteration = -1;
  for (int i = 1; i < arguments.size(); ++i) {
    const QString& arg = arguments[i];
    auto next = [&]() -> QString { return i + 1 < arguments.size() ? arguments[++i] : QString(); };
    if (arg == "--help" || arg == "-h") {
      printUsage(stdout);
      return 0;
    } else if (arg == "--screenshot") {
      screenshot = next();
    } else if (arg == "--compare") {
      compare = true;
    } else if (arg == "--tab") {
      tab = next();
    } else if (arg == "--iteration") {
      iteration = next().toLong();
    } else if (arg == "--size") {
      QStringList parts = next().split('x');
      if (parts.size() != 2 || parts[0].toInt() < 200 || parts[1].toInt() < 200) {
        std::fprintf(stderr, "ddpscope-gui: --size: expected WxH, e.g. 1500x900\n");
        return 2;
      }
      size = QSize(parts[0].toInt(), parts[1].toInt());
    } else if (arg.startsWith("--")) {
      std::fprintf(stderr, "ddpscope-gui: unknown option %s\n", qPrintable(arg));
      printUsage(stderr);
      return 2;
    } else {
      paths << arg;
    }
  }

  MainWindow window;
  window.resize(size);
  bool failed = false;
  if (!screenshot.isEmpty()) {
    window.setErrorHandler([&failed](const QString& title, const QString& message) {
      std::fprintf(stderr, "ddpscope-gui: %s: %s\n", qPrintable(title), qPrintable(message));
      failed = true;
    });
    window.setAttribute(Qt::WA_DontShowOnScreen, true);
    if (!paths.isEmpty()) window.openPathsBlocking(paths);
  } else {
    window.openPaths(paths);
  }
  window.show();

  static const QStringList kTabs = {"timeline", "overlap", "compare", "whatif", "sweep", "tuning"};
  if (compare) tab = "compare";
  if (!tab.isEmpty()) {
    int index = kTabs.indexOf(tab);
    if (index < 0) {
      std::fprintf(stderr, "ddpscope-gui: --tab: expected one of %s\n",
                   qPrintable(kTabs.join(", ")));
      return 2;
    }
    window.showTab(static_cast<MainWindow::Tab>(index));
  }
  if (iteration >= 0) {
    auto fit = [iteration](TimelineView* view, ZoomStack* zoom) {
      const auto& doc = view->document();
      if (!doc) return;
      for (int r = 0; r < doc->timeline().rankCount(); ++r) {
        for (const auto& it : doc->iterations(r)) {
          if (it.index != iteration) continue;
          Nanos pad = it.duration / 50;
          zoom->zoomTo(it.start - view->offset() - pad, it.end() - view->offset() + pad);
          return;
        }
      }
    };
    fit(window.timelineView(), window.zoom());
    fit(window.comparePanel()->viewA(), window.comparePanel()->zoom());
  }
  if (screenshot.isEmpty()) return QApplication::exec();

  if (tab == "whatif") waitFor(window.whatIfPanel(), &WhatIfPanel::resultShown, 20000);
  if (tab == "sweep") {
    window.sweepPanel()->runSweep();
    waitFor(window.sweepPanel(), &SweepPanel::sweepFinished, 60000);
  }
  QApplication::processEvents();
  bool ok = screenshot.endsWith(".svg", Qt::CaseInsensitive) ? window.exportView(screenshot)
                                                             : window.saveScreenshot(screenshot);
  if (!ok) {
    std::fprintf(stderr, "ddpscope-gui: cannot write %s\n", qPrintable(screenshot));
    return 1;
  }
  return failed ? 1 : 0;
}

}  // namespace ddpscope::gui
