// SweepPanel: step time (solid) and exposed communication (dashed) vs bucket_cap_mb, one colour
// per world size, on a log-scaled cap axis; the lowest step time of each world size is marked
// with a star. Clicking a point (or a star) emits configurationChosen with that point's
// settings (the main window simulates it with a trace and shows its timeline). The sweep runs
// on a worker thread (runSweep: metrics only, like `ddpscope sweep`).
#pragma once

#include <QWidget>
#include <optional>

#include "gui/model/whatif.h"
#include "gui/model/world_sizes.h"

class QLineEdit;
class QPushButton;
class QLabel;
class QChartView;

namespace ddpscope::gui {

class SweepPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SweepPanel(QWidget* parent = nullptr);

  // Base settings (model, cluster, flags) come from the what-if panel. A new cluster replaces
  // the world sizes with its defaults (defaultSweepWorldSizes) unless the user edited them.
  void setBaseSettings(const WhatIfSettings& base);
  void setWorldSizes(const QString& commaList);
  // Starts the sweep on a worker; sweepFinished() when done.
  void runSweep();
  const std::optional<SweepResult>& result() const { return m_result; }
  // The point nearest to (capMb, worldSize) and its settings; used by clicks and tests.
  std::optional<WhatIfSettings> settingsForPoint(int worldSize, double capMb) const;
  QChartView* chartView() const { return m_chartView; }

 signals:
  void sweepFinished();
  void configurationChosen(ddpscope::gui::WhatIfSettings settings);

 private:
  void showResult(const SweepResult& result);
  void onPointClicked(int worldSize, const QPointF& point);

  WhatIfSettings m_base;
  QLineEdit* m_worldSizes;
  QPushButton* m_run;
  QLabel* m_status;
  QChartView* m_chartView;
  std::optional<SweepResult> m_result;
};

}  // namespace ddpscope::gui
