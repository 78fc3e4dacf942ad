// The Sweep tab's "Plan" action: clicking it shows, per world size, what `ddpscope plan --json`
// (sim::runPlan, run in-process through the CLI) computes for the same settings — the planned
// step time as a line on the chart, the uniform-cap curves, the bucket table, the DDP call — and
// "Open planned timeline" opens the simulated trace of exactly that bucket_cap_mb_list.
#include <QComboBox>
#include <QLabel>
#include <QLineSeries>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"
#include "gui/model/whatif.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/sweep_panel.h"
#include "gui/widgets/whatif_panel.h"
#include "models/zoo.h"
#include "sim/cost/cluster.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

// `ddpscope plan --json` for the sweep tab's default settings (gpt2-small on dgx-a100, DDP's
// defaults) at `worldSize`.
nlohmann::json cliPlan(int worldSize, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"plan",
                                   "--model",
                                   "gpt2-small",
                                   "--cluster",
                                   "dgx-a100",
                                   "--world-size",
                                   std::to_string(worldSize),
                                   "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::ostringstream out, err;
  if (cli::runCli(args, out, err) != 0) qFatal("ddpscope plan failed: %s", err.str().c_str());
  return nlohmann::json::parse(out.str());
}

double nsToMs(const nlohmann::json& ns) {
  return Nanos(ns.get<int64_t>()).toMillis();
}

QString cell(QTableWidget* table, int row, int column) {
  QTableWidgetItem* item = table->item(row, column);
  return item ? item->text() : QString();
}

QString ms3(const nlohmann::json& ns) {
  return QString::number(nsToMs(ns), 'f', 3);
}

// The chart's dotted "planned list, W ranks" line: its y (both ends), or NaN when absent.
double plannedLineMs(QChart* chart, int worldSize) {
  for (QAbstractSeries* series : chart->series()) {
    if (series->name() != QStringLiteral("planned list, %1 ranks").arg(worldSize)) continue;
    auto* line = qobject_cast<QLineSeries*>(series);
    if (!line || line->count() != 2 || line->at(0).y() != line->at(1).y()) return std::nan("");
    return line->at(0).y();
  }
  return std::nan("");
}

}  // namespace

class SweepPlanTest : public QObject {
  Q_OBJECT
 private slots:
  void planShowsWhatRunPlanComputesAndOpensItsTimeline();
  void torch113PlansAUniformCapOnly();
  void badSettingsShowTheError();
  void aPlanResolvesTheModelAndClusterOnce();
};

void SweepPlanTest::planShowsWhatRunPlanComputesAndOpensItsTimeline() {
  MainWindow window;
  window.resize(1400, 900);
  window.show();
  window.showTab(MainWindow::kSweepTab);
  SweepPanel* panel = window.sweepPanel();
  panel->setBaseSettings(WhatIfSettings{});  // gpt2-small on dgx-a100, DDP's defaults
  panel->setWorldSizes("8,32");
  QSignalSpy planned(panel, &SweepPanel::planFinished);
  auto* button = panel->findChild<QPushButton*>("sweepPlan");
  QVERIFY(button);
  QTest::mouseClick(button, Qt::LeftButton);
  QVERIFY(planned.wait(120000));
  QVERIFY(panel->planOutcome().has_value());
  QCOMPARE(panel->shownPlanWorldSize(), 8);

  QChart* chart = panel->chartView()->chart();
  auto* table = panel->planTable();
  auto* summary = panel->findChild<QLabel*>("planSummary");
  QVERIFY(summary && summary->isVisible());
  for (int worldSize : {8, 32}) {
    const nlohmann::json cli = cliPlan(worldSize);
    QVERIFY(panel->selectPlan(worldSize));
    QCOMPARE(panel->shownPlanWorldSize(), worldSize);
    const nlohmann::json& p = cli["planned"];
    QVERIFY(p.is_object());
    // The chart: the planned step time as a line; the uniform curves are the plan's sweep.
    QCOMPARE(plannedLineMs(chart, worldSize), nsToMs(p["step_time_ns"]));
    const SweepResult& curves = panel->planOutcome()->sweep;
    bool sawBestUniform = false;
    for (const SweepPoint& point : curves.points) {
      if (point.worldSize == worldSize &&
          point.bucketCapMb == cli["best_uniform"]["bucket_cap_mb"].get<double>()) {
        QCOMPARE(point.stepTime.count(), cli["best_uniform"]["step_time_ns"].get<int64_t>());
        sawBestUniform = true;
      }
    }
    QVERIFY(sawBestUniform);
    // The table: one row per planned bucket, the CLI's numbers.
    const nlohmann::json& buckets = p["buckets"];
    QCOMPARE(table->rowCount(), static_cast<int>(buckets.size()));
    for (size_t k = 0; k < buckets.size(); ++k) {
      const nlohmann::json& b = buckets[k];
      const int row = static_cast<int>(k);
      QCOMPARE(cell(table, row, 0),
               QStringLiteral("%1..%2").arg(b["first"].get<int>()).arg(b["last"].get<int>()));
      QCOMPARE(cell(table, row, 1), QString::number(b["bytes"].get<double>() / (1 << 20), 'f', 3));
      QCOMPARE(cell(table, row, 2), QString::number(b["cap_mib"].get<int64_t>()));
      QCOMPARE(cell(table, row, 3), ms3(b["ready_ns"]));
      QCOMPARE(cell(table, row, 4), ms3(b["start_ns"]));
      QCOMPARE(cell(table, row, 5), ms3(b["end_ns"]));
      QCOMPARE(cell(table, row, 6), ms3(p["simulated_allreduces"][k]["start_ns"]));
      QCOMPARE(cell(table, row, 7), ms3(p["simulated_allreduces"][k]["end_ns"]));
    }
    QVERIFY2(summary->text().contains(
                 QString::fromStdString(cli["ddp_kwargs"].get<std::string>()).toHtmlEscaped()),
             qPrintable(summary->text()));
    QVERIFY2(summary->text().contains(ms3(p["step_time_ns"]) + " ms"), qPrintable(summary->text()));
  }

  // Open the 32-rank plan's timeline: the simulated trace of its bucket_cap_mb_list.
  QVERIFY(panel->selectPlan(32));
  const nlohmann::json cli = cliPlan(32);
  const std::vector<int64_t> caps = cli["planned"]["bucket_cap_mb_list"];
  QSignalSpy loaded(&window, &MainWindow::documentLoaded);
  auto* open = panel->findChild<QPushButton*>("openPlanTimeline");
  QVERIFY(open && open->isEnabled());
  QTest::mouseClick(open, Qt::LeftButton);
  QVERIFY(loaded.wait(60000));
  TraceDocumentPtr document = window.document(0);
  QVERIFY(document);
  QCOMPARE(document->worldSize(), 32);
  QVERIFY(document->ddpSettings().has_value());
  QCOMPARE(document->ddpSettings()->bucketCapMbList, caps);
  // Its simulation is the plan's full simulation.
  auto opened = runWhatIf(*panel->shownPlanSettings(), /*recordTrace=*/false);
  QVERIFY2(opened.isOk(), opened.status().message().c_str());
  QCOMPARE(opened->summary.stepTime.count(), cli["planned"]["step_time_ns"].get<int64_t>());
  QCOMPARE(opened->summary.bucketBytes.size(), cli["planned"]["buckets"].size());

  // A plain sweep afterwards replaces the chart and hides the plan.
  QSignalSpy swept(panel, &SweepPanel::sweepFinished);
  panel->runSweep();
  QVERIFY(swept.wait(60000));
  QVERIFY(!panel->planOutcome().has_value());
  QVERIFY(std::isnan(plannedLineMs(panel->chartView()->chart(), 8)));
  QVERIFY(!summary->isVisible());
}

void SweepPlanTest::torch113PlansAUniformCapOnly() {
  SweepPanel panel;
  panel.resize(1200, 800);
  WhatIfSettings base;
  base.ddp.profile = ddp::SemanticsProfile::kV1_13;
  panel.setBaseSettings(base);
  panel.setWorldSizes("16");
  QSignalSpy planned(&panel, &SweepPanel::planFinished);
  panel.runPlan();
  QVERIFY(planned.wait(120000));
  QVERIFY(panel.planOutcome().has_value());
  const nlohmann::json cli = cliPlan(16, {"--torch-version", "1.13"});
  QVERIFY(cli["planned"].is_null());
  QCOMPARE(panel.planTable()->rowCount(), 0);
  QVERIFY(!panel.shownPlanSettings().has_value());
  QVERIFY(std::isnan(plannedLineMs(panel.chartView()->chart(), 16)));
  auto* summary = panel.findChild<QLabel*>("planSummary");
  QVERIFY(summary->text().contains("torch 1.13 has no bucket_cap_mb_list"));
  QVERIFY2(summary->text().contains(QString::fromStdString(cli["ddp_kwargs"].get<std::string>())),
           qPrintable(summary->text()));
  QVERIFY(!panel.findChild<QPushButton*>("openPlanTimeline")->isEnabled());
}

void SweepPlanTest::badSettingsShowTheError() {
  SweepPanel panel;
  WhatIfSettings base;
  base.ddp.findUnusedParameters = true;  // buckets never rebuilt: the planner refuses
  panel.setBaseSettings(base);
  panel.setWorldSizes("8");
  QSignalSpy planned(&panel, &SweepPanel::planFinished);
  panel.runPlan();
  QVERIFY(planned.wait(60000));
  QVERIFY(!panel.planOutcome().has_value());
  auto* status = panel.findChild<QLabel*>("sweepStatus");
  QVERIFY2(status->text().contains("find_unused_parameters=True without static_graph"),
           qPrintable(status->text()));
  // A world size that is not a number is named, and nothing runs.
  panel.setWorldSizes("8,x");
  panel.runPlan();
  QVERIFY2(status->text().contains("'x' is not a positive whole number"),
           qPrintable(status->text()));
  QCOMPARE(planned.count(), 1);
}

// Several world sizes are one request: the model and cluster are read when the plan's settings are
// parsed, never again per world size. Both come from files here, deleted after the parse; the
// plans of three world sizes still run, and each is `ddpscope plan`'s at that size.
void SweepPlanTest::aPlanResolvesTheModelAndClusterOnce() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string modelPath = dir.filePath("gpt2-small.json").toStdString();
  const std::string clusterPath = dir.filePath("dgx-a100.json").toStdString();
  for (const auto& [path, text] : {std::pair{modelPath, models::zooModelJson("gpt2-small")},
                                   std::pair{clusterPath, sim::builtinClusterJson("dgx-a100")}}) {
    QVERIFY(!text.empty());
    std::ofstream(path) << text;
  }
  WhatIfSettings base;
  base.model = modelPath;
  base.cluster = clusterPath;
  const std::vector<double> caps(std::begin(kTypicalBucketCapsMb), std::end(kTypicalBucketCapsMb));
  const StatusOr<api::PlanRequest> input = planRequestOf(base, caps);
  QVERIFY2(input.isOk(), input.status().message().c_str());
  QVERIFY(QFile::remove(QString::fromStdString(modelPath)));
  QVERIFY(QFile::remove(QString::fromStdString(clusterPath)));
  // Parsing again now fails: the files are gone.
  QVERIFY(!planRequestOf(base, caps).isOk());

  const std::vector<int> worldSizes = {8, 16, 32};
  const StatusOr<PlanOutcome> outcome = runPlanAt(*input, worldSizes);
  QVERIFY2(outcome.isOk(), outcome.status().message().c_str());
  QCOMPARE(outcome->plans.size(), worldSizes.size());
  for (size_t i = 0; i < worldSizes.size(); ++i) {
    const nlohmann::json cli = cliPlan(worldSizes[i]);
    const sim::PlanResult& plan = outcome->plans[i];
    QCOMPARE(plan.planned.stepTime.count(), cli["planned"]["step_time_ns"].get<int64_t>());
    QCOMPARE(plan.layout.capsMib(),
             cli["planned"]["bucket_cap_mb_list"].get<std::vector<int64_t>>());
  }
  QCOMPARE(outcome->sweep.points.size(), worldSizes.size() * caps.size());
}

QTEST_MAIN(SweepPlanTest)
#include "sweep_plan_test.moc"
