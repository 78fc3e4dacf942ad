// SweepPanel: step time (solid) and exposed communication (dashed) vs bucket_cap_mb, one colour
// per world size, on a log-scaled cap axis; the lowest step time of each world size is marked
// with a star. Clicking a point (or a star) emits configurationChosen with that point's
// settings (the main window simulates it with a trace and shows its timeline). The sweep runs
// on a worker thread (runSweep: metrics only, like `ddpscope sweep`).
//
// Plan (the "Plan" button, runPlan()): the planner behind `ddpscope plan` at each world size, on
// a worker thread. The chart then shows the plans' own uniform-cap curves and, per world size, a
// dotted horizontal line at the planned layout's simulated step time; below it the plan of the
// world size picked in the combo box: the DDP call, the gains, and a table of the planned
// buckets (gradient positions in ready order, MiB, cap entry, the planner's ready/launch/end and
// the full simulation's launch/end, ms from the backward's start). "Open planned timeline" emits
// configurationChosen with the planned bucket_cap_mb_list (the main window simulates it with a
// trace and shows its timeline, as for a clicked point).
#pragma once

#include <QWidget>
#include <optional>

#include "gui/model/whatif.h"
#include "gui/model/world_sizes.h"

class QLineEdit;
class QPushButton;
class QLabel;
class QChartView;
class QComboBox;
class QTableWidget;

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

  // Starts the plan on a worker; planFinished() when done (also on an error, shown in red).
  void runPlan();
  const std::optional<PlanOutcome>& planOutcome() const { return m_plan; }
  // Shows the plan of this world size (an entry of the world sizes planned); false if none.
  bool selectPlan(int worldSize);
  // The world size whose plan is shown (0 when none).
  int shownPlanWorldSize() const;
  // The shown plan's settings (bucket_cap_mb_list); what "Open planned timeline" emits.
  std::optional<WhatIfSettings> shownPlanSettings() const;
  QTableWidget* planTable() const { return m_planTable; }

 signals:
  void sweepFinished();
  void planFinished();
  void configurationChosen(ddpscope::gui::WhatIfSettings settings);

 private:
  std::optional<std::vector<int>> parseWorldSizes();
  // Runs `job` (→ StatusOr<T>) on a worker with the buttons disabled; back on the UI thread, shows
  // its error (after `errorPrefix`) in the status line or passes its value to `show`, then emits
  // `done`.
  template <typename T, typename Job, typename Show>
  void runOnWorker(const QString& errorPrefix, Job job, Show show, void (SweepPanel::*done)());
  void showResult(const SweepResult& result);
  void showPlan(const PlanOutcome& outcome);
  void showPlanDetails(size_t index);
  void onPointClicked(int worldSize, const QPointF& point);

  WhatIfSettings m_base;
  QLineEdit* m_worldSizes;
  QPushButton* m_run;
  QPushButton* m_planButton;
  QLabel* m_status;
  QChartView* m_chartView;
  QWidget* m_planArea;
  QComboBox* m_planWorldSize;
  QLabel* m_planSummary;
  QTableWidget* m_planTable;
  QPushButton* m_openPlan;
  std::optional<SweepResult> m_result;
  std::optional<PlanOutcome> m_plan;
  WhatIfSettings m_planBase;  // the settings m_plan was made for
};

}  // namespace ddpscope::gui
