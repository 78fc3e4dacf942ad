// The Overlap and Compare tabs.
//
// OverlapPanel: the OverlapModel table (per rank and iteration, HTA overlap) and a stacked bar
//   per rank (compute only, overlapped = hidden communication, exposed communication), like
//   the PyTorch profiler's distributed view.
// ComparePanel: runs A and B stacked under one TimeAxis and one ZoomStack, each shifted so that
//   its first matched iteration starts at t = 0 (RunComparison::alignA / alignB), and the
//   CompareModel table of deltas computed by traces::compareRuns.
#pragma once

#include <QWidget>

#include "gui/model/metrics_models.h"
#include "gui/model/trace_document.h"
#include "gui/model/zoom_stack.h"

class QTableView;
class QSplitter;
class QLabel;
class QChartView;
class QChart;

namespace ddpscope::gui {

class TimelineView;
class TimeAxis;

class OverlapPanel : public QWidget {
  Q_OBJECT
 public:
  explicit OverlapPanel(QWidget* parent = nullptr);
  void setDocument(TraceDocumentPtr document);
  OverlapModel* model() const { return m_model; }

 private:
  OverlapModel* m_model;
  QTableView* m_table;
  QChartView* m_chartView;
  QLabel* m_summary;
};

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePanel(QWidget* parent = nullptr);
  // Either may be null (the panel then explains what is missing).
  void setRuns(TraceDocumentPtr a, TraceDocumentPtr b, const QString& labelA,
               const QString& labelB);
  CompareModel* model() const { return m_model; }
  ZoomStack* zoom() const { return m_zoom; }
  TimelineView* viewA() const { return m_viewA; }
  TimelineView* viewB() const { return m_viewB; }
  const TraceDocumentPtr& runA() const { return m_a; }
  const TraceDocumentPtr& runB() const { return m_b; }

 signals:
  void spanSelected(ddpscope::gui::TraceDocumentPtr document, ddpscope::gui::SpanRef ref);

 protected:
  void showEvent(QShowEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // Gives each timeline the height it needs (up to 40 % each), the rest to the delta table.
  void fitSplit();

  ZoomStack* m_zoom;
  TimeAxis* m_axis;
  TimelineView* m_viewA;
  TimelineView* m_viewB;
  CompareModel* m_model;
  QTableView* m_table;
  QSplitter* m_split;
  QLabel* m_summary;
  TraceDocumentPtr m_a;
  TraceDocumentPtr m_b;
};

}  // namespace ddpscope::gui
