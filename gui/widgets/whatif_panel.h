// WhatIfPanel: live re-simulation. Controls for model, cluster, world size, bucket cap (a
// slider over the typical values 1–200 MiB), find_unused, static_graph, no_sync K and comm hook;
// the world sizes offered follow the cluster's GPUs per node (gui/model/world_sizes.h);
// every change asks the WhatIfRunner (debounced, coalesced, on a worker thread) and the panel's
// timeline and metrics update when the result arrives. The panel measures change → repaint
// (the timeline is repainted synchronously before the clock stops) and shows it.
//
// "Compare with current" pins the current result as run B; from then on every new result is
// compared (as run A) against the pinned one (comparisonChanged).
#pragma once

#include <QElapsedTimer>
#include <QMap>
#include <QWidget>

#include "gui/model/whatif.h"
#include "gui/model/zoom_stack.h"

class QComboBox;
class QSlider;
class QCheckBox;
class QSpinBox;
class QLabel;
class QPushButton;

namespace ddpscope::gui {

class TimelineView;
class TimeAxis;

class WhatIfPanel : public QWidget {
  Q_OBJECT
 public:
  explicit WhatIfPanel(QWidget* parent = nullptr);

  WhatIfSettings settings() const;
  // Sets every control (one re-simulation).
  void setSettings(const WhatIfSettings& settings);
  WhatIfRunner* runner() const { return m_runner; }
  const WhatIfResultPtr& current() const { return m_current; }
  const WhatIfResultPtr& pinned() const { return m_pinned; }
  // The numbers shown, by key: step_time_ms, forward_ms, backward_ms, comm_ms,
  // exposed_comm_ms, overlap_percent, num_buckets.
  const QMap<QString, double>& displayedMetrics() const { return m_displayed; }
  double lastLatencyMs() const { return m_lastLatencyMs; }
  TimelineView* view() const { return m_view; }

 public slots:
  void pinCurrent();

 signals:
  // The change → repaint latency of the settings now shown, in ms.
  void resultShown(double latencyMs);
  void comparisonChanged(ddpscope::gui::WhatIfResultPtr a, ddpscope::gui::WhatIfResultPtr b);
  void openInTimeline(ddpscope::gui::WhatIfResultPtr result);

 private:
  void onChanged();
  void onResult(const WhatIfResultPtr& result);
  void updateCapLabel();
  // Fills the world-size list for the chosen cluster (gui/model/world_sizes.h), keeping the
  // current size if the cluster accepts it, else the largest offered size below it.
  void offerWorldSizes();

  WhatIfRunner* m_runner;
  ZoomStack* m_zoom;
  QComboBox* m_model;
  QComboBox* m_cluster;
  QComboBox* m_worldSize;
  QSlider* m_cap;
  QLabel* m_capLabel;
  QCheckBox* m_findUnused;
  QCheckBox* m_staticGraph;
  QSpinBox* m_noSync;
  QComboBox* m_hook;
  QPushButton* m_pin;
  QPushButton* m_open;
  QLabel* m_metrics;
  QLabel* m_status;
  QLabel* m_workload;  // the stated workload of the shown result
  TimeAxis* m_axis;
  TimelineView* m_view;
  bool m_blockChanges = false;
  QElapsedTimer m_changeClock;
  WhatIfResultPtr m_current;
  WhatIfResultPtr m_pinned;
  QMap<QString, double> m_displayed;
  double m_lastLatencyMs = 0;
};

}  // namespace ddpscope::gui
