// The ddpscope-gui command line, callable in-process (tests run the screenshot mode):
//
//   ddpscope-gui [PATH...] [--compare] [--tab timeline|overlap|compare|whatif|sweep]
//                [--iteration N] [--size WxH] [--screenshot OUT.png|OUT.svg]
//
// PATHs open as MainWindow::openPaths opens them (loadTraces' rules): a directory, or several
// per-rank PyTorch profiler traces, is one multi-rank run; `FILE FILE_B` opens run A and run B
// (comparison), `DIR_A DIR_B` two imported runs. --screenshot renders the window
// offscreen after loading (synchronously) and exits: 0 on success, 1 when a file failed to
// load or the image could not be written, 2 on bad arguments. --compare shows the Compare tab;
// --iteration N zooms to iteration N (ProfilerStep#N) of the first rank; an .svg screenshot
// exports the current tab as SVG.
#pragma once

#include <QStringList>

namespace ddpscope::gui {

// Needs a QApplication. Returns the exit code; without --screenshot it runs the event loop.
int runGuiApp(const QStringList& arguments);

}  // namespace ddpscope::gui
