// MainWindow of ddpscope-gui: tabs Timeline, Overlap, Compare, What-if, Sweep, Tuning (a report of
// ddpscope.torch.tune: File ▸ Open tune report); docks for lanes,
// search results and the selected span's details.
//
// Opening: File ▸ Open (run A; several files may be picked), File ▸ Open folder (run A),
// File ▸ Open run B for comparison, recent files and folders (QSettings), drag and drop of
// files and folders, command-line paths. All of them go through openPaths (loadTraces' rules):
// a folder, or several per-rank PyTorch profiler traces, opens as one multi-rank run; one file
// opens as run A; two other traces as runs A and B. Files load on a worker (TraceLoader) with
// progress in the status bar (percent of one file; files read of several). Errors are reported
// through reportError(): the errorReported signal always fires, then the error handler runs — by
// default a non-modal QMessageBox; tests install their own handler. A failed load leaves the
// current documents untouched and the window usable.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <functional>

#include "gui/model/metrics_models.h"
#include "gui/model/timeline_model.h"
#include "gui/model/trace_loader.h"
#include "gui/model/whatif.h"
#include "gui/model/zoom_stack.h"

class QTabWidget;
class QTreeView;
class QTableView;
class QPlainTextEdit;
class QLineEdit;
class QProgressBar;
class QLabel;
class QMenu;

namespace ddpscope::gui {

class TimelineView;
class TimeAxis;
class OverlapPanel;
class ComparePanel;
class WhatIfPanel;
class SweepPanel;
class TunePanel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Tab { kTimelineTab, kOverlapTab, kCompareTab, kWhatIfTab, kSweepTab, kTuneTab };
  using ErrorHandler = std::function<void(const QString& title, const QString& message)>;

  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // slot 0 = run A (the main document), 1 = run B (comparison).
  void openFile(const QString& path, int slot = 0);
  // Synchronous load (command-line screenshots); errors go through reportError.
  bool openFileBlocking(const QString& path, int slot = 0);
  // Files and folders as one or two runs from `slot` (loadTraces), on the worker.
  void openPaths(const QStringList& paths, int slot = 0);
  bool openPathsBlocking(const QStringList& paths, int slot = 0);
  // A report of ddpscope.torch.tune in the Tuning tab (shown); false after reporting the error.
  bool openTuneReport(const QString& path);
  void setDocument(int slot, TraceDocumentPtr document, const QString& label);
  TraceDocumentPtr document(int slot = 0) const { return slot == 0 ? m_docA : m_docB; }

  void setErrorHandler(ErrorHandler handler) { m_errorHandler = std::move(handler); }
  void reportError(const QString& title, const QString& message);

  // Renders the current tab (PNG, or SVG when the path ends in .svg). False on failure.
  bool exportView(const QString& path);
  // Grabs the whole window into a PNG.
  bool saveScreenshot(const QString& path);
  void showTab(Tab tab);

  TimelineView* timelineView() const { return m_view; }
  ZoomStack* zoom() const { return m_zoom; }
  TimelineModel* timelineModel() const { return m_timelineModel; }
  SearchModel* searchModel() const { return m_searchModel; }
  OverlapPanel* overlapPanel() const { return m_overlap; }
  ComparePanel* comparePanel() const { return m_compare; }
  WhatIfPanel* whatIfPanel() const { return m_whatIf; }
  SweepPanel* sweepPanel() const { return m_sweep; }
  TunePanel* tunePanel() const { return m_tune; }
  TraceLoader* loader() const { return m_loader; }
  QStringList recentFiles() const;

 signals:
  void errorReported(const QString& message);
  void documentLoaded(int slot);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  // The constructor's steps, in order.
  void buildTabs();                  // Timeline (axis, view, legend) and the panels' tabs
  void buildDocks();                 // docks: lanes, search, details
  void buildStatusBar();             // the status text and the load progress
  void connectLoader();              // load progress, loaded documents and runs, failures
  void connectSelectionAndSearch();  // span details, search, lane activation
  void connectPanels();              // what-if comparison, sweep choices, the sweep's base
  void buildMenus();
  // Simulates a configuration picked in the Sweep tab on a worker, then shows the result in
  // the timeline or reports the simulation's error.
  void simulateConfiguration(const WhatIfSettings& settings);
  void showRun(int slot, const LoadedRun& run);
  void addRecentFile(const QString& path);
  void rebuildRecentMenu();
  void showDetails(const TraceDocumentPtr& document, SpanRef ref);
  void updateCompare();
  void showWhatIfResult(const WhatIfResultPtr& result);
  QWidget* currentExportWidget() const;

  TraceLoader* m_loader;
  ZoomStack* m_zoom;
  TimelineModel* m_timelineModel;
  SearchModel* m_searchModel;
  QTabWidget* m_tabs;
  TimeAxis* m_axis;
  TimelineView* m_view;
  OverlapPanel* m_overlap;
  ComparePanel* m_compare;
  WhatIfPanel* m_whatIf;
  SweepPanel* m_sweep;
  TunePanel* m_tune;
  QTreeView* m_laneTree;
  QTableView* m_searchTable;
  QLineEdit* m_search;
  QPlainTextEdit* m_details;
  QProgressBar* m_progress;
  QLabel* m_statusLabel;
  QMenu* m_recentMenu = nullptr;
  TraceDocumentPtr m_docA;
  TraceDocumentPtr m_docB;
  QString m_labelA;
  QString m_labelB;
  bool m_compareFromWhatIf = false;
  ErrorHandler m_errorHandler;
};

}  // namespace ddpscope::gui
