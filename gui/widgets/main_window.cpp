#include "gui/widgets/main_window.h"

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QSettings>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QTableView>
#include <QToolBar>
#include <QTreeView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <optional>

#include "gui/model/time_scale.h"
#include "gui/widgets/panels.h"
#include "gui/widgets/sweep_panel.h"
#include "gui/widgets/time_axis.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/tune_panel.h"
#include "gui/widgets/whatif_panel.h"

namespace ddpscope::gui {

namespace {
constexpr int kMaxRecent = 10;
const char* kRecentKey = "recentFiles";
}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      m_loader(new TraceLoader(this)),
      m_zoom(new ZoomStack(this)),
      m_timelineModel(new TimelineModel(this)),
      m_searchModel(new SearchModel(this)) {
  setWindowTitle(tr("ddpscope"));
  setAcceptDrops(true);
  resize(1400, 860);

  buildTabs();
  buildDocks();
  buildStatusBar();
  m_errorHandler = [this](const QString& title, const QString& message) {
    auto* box = new QMessageBox(QMessageBox::Critical, title, message, QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // window-modal, non-blocking
  };

  connectLoader();
  connectSelectionAndSearch();
  connectPanels();
  m_sweep->setBaseSettings(m_whatIf->settings());

  buildMenus();
  m_statusLabel->setText(
      tr("Open a trace (Ctrl+O) or a folder of per-rank PyTorch traces (Ctrl+Shift+O), or drop "
         "them here. Wheel: zoom · drag: pan · Backspace: back · F: fit iteration"));
}

MainWindow::~MainWindow() = default;

void MainWindow::buildTabs() {
  m_tabs = new QTabWidget(this);
  auto* timelineTab = new QWidget(m_tabs);
  auto* timelineLayout = new QVBoxLayout(timelineTab);
  timelineLayout->setContentsMargins(0, 0, 0, 0);
  timelineLayout->setSpacing(0);
  m_axis = new TimeAxis(m_zoom, timelineTab);
  m_axis->setCaption(tr("time since start"));
  m_view = new TimelineView(m_zoom, timelineTab);
  timelineLayout->addWidget(m_axis);
  timelineLayout->addWidget(m_view, 1);
  timelineLayout->addWidget(new CategoryLegend(timelineTab));
  m_overlap = new OverlapPanel(m_tabs);
  m_compare = new ComparePanel(m_tabs);
  m_whatIf = new WhatIfPanel(m_tabs);
  m_sweep = new SweepPanel(m_tabs);
  m_tune = new TunePanel(m_tabs);
  m_tabs->addTab(timelineTab, tr("Timeline"));
  m_tabs->addTab(m_overlap, tr("Overlap"));
  m_tabs->addTab(m_compare, tr("Compare"));
  m_tabs->addTab(m_whatIf, tr("What-if"));
  m_tabs->addTab(m_sweep, tr("Sweep"));
  m_tabs->addTab(m_tune, tr("Tuning"));
  setCentralWidget(m_tabs);
}

void MainWindow::buildDocks() {
  m_laneTree = new QTreeView(this);
  m_laneTree->setModel(m_timelineModel);
  m_laneTree->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* lanesDock = new QDockWidget(tr("Ranks and lanes"), this);
  lanesDock->setObjectName("lanes");
  lanesDock->setWidget(m_laneTree);
  addDockWidget(Qt::LeftDockWidgetArea, lanesDock);

  auto* searchWidget = new QWidget(this);
  auto* searchLayout = new QVBoxLayout(searchWidget);
  searchLayout->setContentsMargins(2, 2, 2, 2);
  m_search = new QLineEdit(searchWidget);
  m_search->setPlaceholderText(tr("Search spans by name…"));
  m_search->setClearButtonEnabled(true);
  m_searchTable = new QTableView(searchWidget);
  m_searchTable->setModel(m_searchModel);
  m_searchTable->verticalHeader()->setVisible(false);
  m_searchTable->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_searchTable->horizontalHeader()->setStretchLastSection(true);
  searchLayout->addWidget(m_search);
  searchLayout->addWidget(m_searchTable);
  auto* searchDock = new QDockWidget(tr("Search"), this);
  searchDock->setObjectName("search");
  searchDock->setWidget(searchWidget);
  addDockWidget(Qt::LeftDockWidgetArea, searchDock);

  m_details = new QPlainTextEdit(this);
  m_details->setReadOnly(true);
  m_details->setPlaceholderText(tr("Click a span to see its details."));
  auto* detailsDock = new QDockWidget(tr("Details"), this);
  detailsDock->setObjectName("details");
  detailsDock->setWidget(m_details);
  addDockWidget(Qt::LeftDockWidgetArea, detailsDock);
  resizeDocks({lanesDock, searchDock, detailsDock}, {260, 200, 200}, Qt::Vertical);
  resizeDocks({lanesDock}, {260}, Qt::Horizontal);
}

void MainWindow::buildStatusBar() {
  m_progress = new QProgressBar(this);
  m_progress->setMaximumWidth(220);
  m_progress->setVisible(false);
  m_statusLabel = new QLabel(this);
  statusBar()->addWidget(m_statusLabel, 1);
  statusBar()->addPermanentWidget(m_progress);
}

void MainWindow::connectLoader() {
  connect(m_loader, &TraceLoader::progress, this, [this](int, int percent, const QString& stage) {
    m_progress->setVisible(true);
    m_progress->setRange(0, 100);
    m_progress->setValue(percent);
    m_progress->setFormat(stage + " %p%");
  });
  connect(m_loader, &TraceLoader::filesProgress, this,
          [this](int, int filesDone, int fileCount, const QString& file) {
            m_progress->setVisible(true);
            if (filesDone < fileCount) {
              m_progress->setRange(0, fileCount);
              m_progress->setValue(filesDone);
              m_progress->setFormat(tr("read %v/%m traces"));
              m_statusLabel->setText(tr("read %1 (%2 of %3)")
                                         .arg(QFileInfo(file).fileName())
                                         .arg(filesDone)
                                         .arg(fileCount));
            } else {
              m_progress->setRange(0, 0);  // busy: the import itself reports no progress
              m_statusLabel->setText(tr("%1 traces read; importing…").arg(fileCount));
            }
          });
  connect(m_loader, &TraceLoader::loaded, this,
          [this](int slot, const QString& path, TraceDocumentPtr doc) {
            m_progress->setVisible(m_loader->pending() > 0);
            addRecentFile(path);
            setDocument(slot, std::move(doc), QFileInfo(path).fileName());
          });
  connect(m_loader, &TraceLoader::runLoaded, this, [this](int slot, const LoadedRun& run) {
    m_progress->setVisible(m_loader->pending() > 0);
    showRun(slot, run);
  });
  connect(m_loader, &TraceLoader::failed, this,
          [this](int, const QString& path, const QString& message) {
            m_progress->setVisible(m_loader->pending() > 0);
            reportError(tr("Cannot open %1").arg(QFileInfo(path).fileName()), message);
          });
}

void MainWindow::connectSelectionAndSearch() {
  connect(m_view, &TimelineView::spanSelected, this,
          [this](SpanRef ref) { showDetails(m_docA, ref); });
  connect(m_compare, &ComparePanel::spanSelected, this, &MainWindow::showDetails);
  connect(m_search, &QLineEdit::textChanged, this, [this](const QString& text) {
    m_searchModel->setQuery(text);
    m_view->setHighlight(text);
    m_statusLabel->setText(text.isEmpty() ? QString()
                                          : tr("%1%2 spans match \"%3\"")
                                                .arg(m_searchModel->rowCount())
                                                .arg(m_searchModel->truncated() ? "+" : "")
                                                .arg(text));
  });
  connect(m_searchTable, &QTableView::activated, this, [this](const QModelIndex& index) {
    QPoint ref = index.data(kSpanRefRole).toPoint();
    showTab(kTimelineTab);
    m_view->revealSpan(SpanRef{ref.x(), ref.y()});
  });
  connect(m_laneTree, &QTreeView::activated, this, [this](const QModelIndex& index) {
    int row = index.data(kRowRole).toInt();
    if (row >= 0) showTab(kTimelineTab);
  });
}

void MainWindow::connectPanels() {
  connect(m_whatIf, &WhatIfPanel::comparisonChanged, this,
          [this](WhatIfResultPtr a, WhatIfResultPtr b) {
            bool first = !m_compareFromWhatIf;
            m_compareFromWhatIf = true;
            m_compare->setRuns(
                a->document, b->document,
                tr("current — %1").arg(QString::fromStdString(a->settings.describe())),
                tr("pinned — %1").arg(QString::fromStdString(b->settings.describe())));
            if (first) showTab(kCompareTab);
          });
  connect(m_whatIf, &WhatIfPanel::openInTimeline, this, &MainWindow::showWhatIfResult);
  connect(m_sweep, &SweepPanel::configurationChosen, this, &MainWindow::simulateConfiguration);
  connect(m_tabs, &QTabWidget::currentChanged, this, [this](int index) {
    if (index == kSweepTab) m_sweep->setBaseSettings(m_whatIf->settings());
  });
}

void MainWindow::simulateConfiguration(const WhatIfSettings& s) {
  m_statusLabel->setText(tr("simulating %1…").arg(QString::fromStdString(s.describe())));
  using Result = std::shared_ptr<StatusOr<WhatIfResult>>;
  auto* watcher = new QFutureWatcher<Result>(this);
  connect(watcher, &QFutureWatcher<Result>::finished, this, [this, watcher]() {
    Result r = watcher->result();
    watcher->deleteLater();
    if (!r->isOk()) {
      reportError(tr("Simulation failed"), QString::fromStdString(r->status().message()));
      return;
    }
    showWhatIfResult(std::make_shared<WhatIfResult>(std::move(*r).value()));
  });
  watcher->setFuture(QtConcurrent::run(
      [s]() { return std::make_shared<StatusOr<WhatIfResult>>(runWhatIf(s, true)); }));
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  const QString filter = tr("Traces (*.json *.json.gz *.gz);;All files (*)");
  QAction* open = file->addAction(tr("&Open…"), this, [this, filter]() {
    QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open traces (per-rank PyTorch profiler traces open as one run)"), QString(),
        filter);
    if (!paths.isEmpty()) openPaths(paths, 0);
  });
  open->setObjectName("openAction");
  open->setShortcut(QKeySequence::Open);
  QAction* openFolder = file->addAction(tr("Open &folder…"), this, [this]() {
    QString dir = QFileDialog::getExistingDirectory(
        this, tr("Open a folder of per-rank PyTorch profiler traces as one run"));
    if (!dir.isEmpty()) openPaths({dir}, 0);
  });
  openFolder->setObjectName("openFolderAction");
  openFolder->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  file->addAction(tr("Open run &B for comparison…"), this, [this, filter]() {
    QStringList paths = QFileDialog::getOpenFileNames(this, tr("Open run B"), QString(), filter);
    if (!paths.isEmpty()) openPaths(paths, 1);
  });
  QAction* openTune = file->addAction(tr("Open &tune report…"), this, [this]() {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open a report of ddpscope.torch.tune"), QString(),
                                     tr("Tune reports (*.json);;All files (*)"));
    if (!path.isEmpty()) openTuneReport(path);
  });
  openTune->setObjectName("openTuneReportAction");
  m_recentMenu = file->addMenu(tr("Open &recent"));
  rebuildRecentMenu();
  file->addSeparator();
  file->addAction(tr("Export view as &PNG…"), this, [this]() {
    QString path =
        QFileDialog::getSaveFileName(this, tr("Export PNG"), "ddpscope.png", "PNG (*.png)");
    if (!path.isEmpty() && !exportView(path)) reportError(tr("Export failed"), path);
  });
  file->addAction(tr("Export view as &SVG…"), this, [this]() {
    QString path =
        QFileDialog::getSaveFileName(this, tr("Export SVG"), "ddpscope.svg", "SVG (*.svg)");
    if (!path.isEmpty() && !exportView(path)) reportError(tr("Export failed"), path);
  });
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  QAction* back = view->addAction(tr("Zoom &back"), this, [this]() {
    (m_tabs->currentIndex() == kCompareTab ? m_compare->zoom() : m_zoom)->back();
  });
  back->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Left));
  QAction* fit = view->addAction(tr("&Fit to iteration"), this, [this]() {
    if (m_tabs->currentIndex() == kCompareTab) {
      m_compare->viewA()->fitToIteration();
    } else {
      m_view->fitToIteration();
    }
  });
  fit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_I));
  QAction* reset = view->addAction(tr("&Reset zoom"), this, [this]() {
    (m_tabs->currentIndex() == kCompareTab ? m_compare->zoom() : m_zoom)->reset();
  });
  reset->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
  QAction* find = view->addAction(tr("&Search by name"), this, [this]() {
    m_search->setFocus();
    m_search->selectAll();
  });
  find->setShortcut(QKeySequence::Find);

  QToolBar* toolbar = addToolBar(tr("Main"));
  toolbar->setObjectName("main-toolbar");
  toolbar->addAction(open);
  toolbar->addAction(openFolder);
  toolbar->addAction(back);
  toolbar->addAction(fit);
  toolbar->addAction(reset);
}

QStringList MainWindow::recentFiles() const {
  return QSettings().value(kRecentKey).toStringList();
}

void MainWindow::addRecentFile(const QString& path) {
  QString absolute = QFileInfo(path).absoluteFilePath();
  QStringList files = recentFiles();
  files.removeAll(absolute);
  files.prepend(absolute);
  while (files.size() > kMaxRecent) files.removeLast();
  QSettings().setValue(kRecentKey, files);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  if (!m_recentMenu) return;
  m_recentMenu->clear();
  const QStringList files = recentFiles();
  for (const QString& path : files) {
    m_recentMenu->addAction(path, this, [this, path]() { openPaths({path}, 0); });
  }
  m_recentMenu->setEnabled(!files.isEmpty());
}

void MainWindow::openFile(const QString& path, int slot) {
  openPaths({path}, slot);
}

bool MainWindow::openFileBlocking(const QString& path, int slot) {
  return openPathsBlocking({path}, slot);
}

namespace {

// A report of ddpscope.torch.tune (its "format" leads the file) rather than a trace.
bool looksLikeTuneReport(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return false;
  return file.read(256).contains(api::kTuneReportFormat);
}

}  // namespace

void MainWindow::openPaths(const QStringList& paths, int slot) {
  if (paths.isEmpty()) return;
  if (paths.size() == 1 && looksLikeTuneReport(paths.front())) {
    openTuneReport(paths.front());
    return;
  }
  m_statusLabel->setText(tr("opening %1…").arg(describePaths(paths)));
  m_progress->setVisible(true);
  m_progress->setRange(0, 100);
  m_progress->setValue(0);
  m_loader->openPaths(paths, slot);
}

bool MainWindow::openPathsBlocking(const QStringList& paths, int slot) {
  if (paths.size() == 1 && looksLikeTuneReport(paths.front())) return openTuneReport(paths.front());
  StatusOr<std::vector<LoadedRun>> runs = loadTraces(paths, kRunSlots - slot);
  if (!runs.isOk()) {
    reportError(tr("Cannot open %1").arg(QFileInfo(describePaths(paths)).fileName()),
                QString::fromStdString(runs.status().message()));
    return false;
  }
  for (size_t i = 0; i < runs->size(); ++i) showRun(slot + static_cast<int>(i), (*runs)[i]);
  return true;
}

void MainWindow::showRun(int slot, const LoadedRun& run) {
  if (!run.recentPath.isEmpty()) addRecentFile(run.recentPath);
  setDocument(slot, run.document, run.label);
  if (slot == 0 && !run.notes.isEmpty()) {
    m_statusLabel->setText(m_statusLabel->text() + " · " + run.notes.join(" · "));
  }
}

void MainWindow::setDocument(int slot, TraceDocumentPtr document, const QString& label) {
  if (slot == 0) {
    m_docA = std::move(document);
    m_labelA = label;
    m_view->setDocument(m_docA, m_docA ? m_docA->startTime() : Nanos(0));
    if (m_docA) m_zoom->setFullRange(Nanos(0), m_docA->endTime() - m_docA->startTime());
    m_timelineModel->setDocument(m_docA);
    m_laneTree->expandAll();
    m_searchModel->setDocument(m_docA);
    m_overlap->setDocument(m_docA);
    m_details->clear();
    setWindowTitle(tr("ddpscope — %1").arg(label));
    if (m_docA) {
      m_statusLabel->setText(tr("%1: %2 ranks, %3 lanes, %4 spans")
                                 .arg(label)
                                 .arg(m_docA->timeline().rankCount())
                                 .arg(m_docA->rowCount())
                                 .arg(m_docA->spanCount()));
    }
  } else {
    m_docB = std::move(document);
    m_labelB = label;
  }
  m_compareFromWhatIf = false;
  updateCompare();
  if (slot == 1 && m_docB) showTab(kCompareTab);
  emit documentLoaded(slot);
}

void MainWindow::updateCompare() {
  m_compare->setRuns(m_docA, m_docB, m_labelA, m_labelB);
}

void MainWindow::showWhatIfResult(const WhatIfResultPtr& result) {
  if (!result || !result->document) return;
  setDocument(0, result->document, QString::fromStdString(result->settings.describe()));
  showTab(kTimelineTab);
}

void MainWindow::showDetails(const TraceDocumentPtr& document, SpanRef ref) {
  if (!document || !ref.valid()) {
    m_details->clear();
    return;
  }
  m_details->setPlainText(QString::fromStdString(spanDetailsText(*document, ref)));
}

void MainWindow::reportError(const QString& title, const QString& message) {
  m_statusLabel->setText(title + ": " + message);
  emit errorReported(message);
  if (m_errorHandler) m_errorHandler(title, message);
}

bool MainWindow::openTuneReport(const QString& path) {
  if (std::optional<QString> error = m_tune->openReport(path)) {
    reportError(tr("Cannot open the tune report"), *error);
    return false;
  }
  showTab(kTuneTab);
  return true;
}

void MainWindow::showTab(Tab tab) {
  m_tabs->setCurrentIndex(tab);
}

QWidget* MainWindow::currentExportWidget() const {
  return m_tabs->currentWidget();
}

bool MainWindow::exportView(const QString& path) {
  QWidget* widget = currentExportWidget();
  if (!widget) return false;
  if (path.endsWith(".svg", Qt::CaseInsensitive)) {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(widget->size());
    svg.setViewBox(QRect(QPoint(0, 0), widget->size()));
    svg.setTitle(windowTitle());
    svg.setDescription(tr("ddpscope view export"));
    QPainter painter;
    if (!painter.begin(&svg)) return false;
    widget->render(&painter);
    return painter.end();
  }
  return widget->grab().save(path);
}

bool MainWindow::saveScreenshot(const QString& path) {
  return grab().save(path);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  QStringList paths;
  for (const QUrl& url : event->mimeData()->urls()) {
    if (url.isLocalFile()) paths << url.toLocalFile();
  }
  openPaths(paths, 0);
  event->acceptProposedAction();
}

}  // namespace ddpscope::gui
