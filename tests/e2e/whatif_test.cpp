// The what-if panel produces the metrics `ddpscope simulate --json` prints for the same
// settings (the CLI runs in-process), and the sweep finds and opens configurations.
#include "gui/model/whatif.h"

#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTest>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.h"
#include "ddp/ddp_settings.h"
#include "gui/model/trace_loader.h"
#include "gui/model/world_sizes.h"
#include "gui/widgets/sweep_panel.h"
#include "gui/widgets/whatif_panel.h"
#include "sim/cost/cluster.h"

using namespace ddpscope;
using namespace ddpscope::gui;

namespace {

nlohmann::json runCliJson(const WhatIfSettings& settings) {
  std::vector<std::string> args = settings.cliArgs();
  args.push_back("--json");
  std::ostringstream out, err;
  int rc = cli::runCli(args, out, err);
  if (rc != 0) qFatal("ddpscope %s failed: %s", args[0].c_str(), err.str().c_str());
  return nlohmann::json::parse(out.str());
}

// Runs a sweep of `base` over `worldSizes` on `panel`; true once it finished with a result.
bool sweepTo(SweepPanel& panel, const WhatIfSettings& base, const QString& worldSizes) {
  panel.setBaseSettings(base);
  panel.setWorldSizes(worldSizes);
  QSignalSpy finished(&panel, &SweepPanel::sweepFinished);
  panel.runSweep();
  return finished.wait(120000) && panel.result().has_value();
}

// `ddpscope simulate`'s step time for `base` at one sweep point's world size and cap.
Nanos cliStepTime(WhatIfSettings base, const SweepPoint& point) {
  base.worldSize = point.worldSize;
  base.ddp.setBucketCapMb(point.bucketCapMb);
  return Nanos(runCliJson(base)["step_time_ns"].get<int64_t>());
}

}  // namespace

class WhatIfTest : public QObject {
  Q_OBJECT
 private slots:
  void panelMetricsEqualCliSimulate_data();
  void panelMetricsEqualCliSimulate();
  void rapidChangesConvergeOnTheLastSettings();
  void pinningComparesAgainstThePinnedResult();
  void sweepMarksTheBestCapAndOpensAPoint();
  void aSimulatedTraceOpensWithEveryDdpSetting();
  void panelStatesTheWorkloadLikeTheCli();
  void blackwellClustersAreListedAndSweep();
  void offeredWorldSizesFollowGpusPerNode();
  void worldSizeListFollowsTheChosenCluster();
  void sweepDefaultsFollowTheCluster();
};

void WhatIfTest::panelMetricsEqualCliSimulate_data() {
  QTest::addColumn<WhatIfSettings>("settings");
  WhatIfSettings base;  // gpt2-small on dgx-a100
  base.worldSize = 64;
  QTest::newRow("gpt2-small 64 ranks cap 25") << base;
  WhatIfSettings s = base;
  s.ddp.setBucketCapMb(5);
  s.ddp.findUnusedParameters = true;
  QTest::newRow("cap 5 find_unused") << s;
  s = base;
  s.ddp.setBucketCapMb(100);
  s.ddp.staticGraph = true;
  s.ddp.noSyncPeriod = 2;
  s.ddp.commHook.kind = ddp::CommHookKind::kFp16;
  QTest::newRow("cap 100 static_graph no_sync 2 fp16") << s;
  s = base;
  s.model = "resnet50";
  s.cluster = "dgx-h100";
  s.worldSize = 16;
  s.ddp.setBucketCapMb(1);
  QTest::newRow("resnet50 dgx-h100 16 ranks cap 1") << s;
}

void WhatIfTest::panelMetricsEqualCliSimulate() {
  QFETCH(WhatIfSettings, settings);
  WhatIfPanel panel;
  panel.resize(1200, 700);
  panel.show();
  QSignalSpy shown(&panel, &WhatIfPanel::resultShown);
  QVERIFY(shown.wait(20000));  // the default settings' first result
  shown.clear();
  panel.setSettings(settings);
  QCOMPARE(panel.settings(), settings);
  QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty() && panel.current()->settings == settings, 20000);
  nlohmann::json cli = runCliJson(settings);
  const auto& shownMetrics = panel.displayedMetrics();
  QCOMPARE(shownMetrics["step_time_ms"], Nanos(cli["step_time_ns"].get<int64_t>()).toMillis());
  QCOMPARE(shownMetrics["forward_ms"], Nanos(cli["forward_ns"].get<int64_t>()).toMillis());
  QCOMPARE(shownMetrics["backward_ms"], Nanos(cli["backward_ns"].get<int64_t>()).toMillis());
  QCOMPARE(shownMetrics["comm_ms"], Nanos(cli["comm_ns"].get<int64_t>()).toMillis());
  QCOMPARE(shownMetrics["exposed_comm_ms"],
           Nanos(cli["exposed_comm_ns"].get<int64_t>()).toMillis());
  QCOMPARE(shownMetrics["overlap_percent"], cli["overlap_percent"].get<double>());
  QCOMPARE(shownMetrics["num_buckets"], cli["num_buckets"].get<double>());
  QCOMPARE(panel.current()->layout.worldSize(), cli["world_size"].get<int>());
  QCOMPARE(panel.current()->summary.bucketBytes, cli["bucket_bytes"].get<std::vector<int64_t>>());
  QVERIFY(panel.current()->document);
  qInfo("change → repaint: %.1f ms (simulate %.1f ms)", panel.lastLatencyMs(),
        static_cast<double>(panel.current()->simulateNs) / 1e6);
}

void WhatIfTest::rapidChangesConvergeOnTheLastSettings() {
  WhatIfPanel panel;
  panel.show();
  QSignalSpy shown(&panel, &WhatIfPanel::resultShown);
  QVERIFY(shown.wait(20000));
  WhatIfSettings s = panel.settings();
  for (double cap : kTypicalBucketCapsMb) {
    s.ddp.setBucketCapMb(cap);
    panel.setSettings(s);
  }
  QTRY_VERIFY_WITH_TIMEOUT(
      panel.current()->settings.ddp.bucketCapMb == 200 && !panel.runner()->busy(), 20000);
  QCOMPARE(panel.current()->settings, s);
}

void WhatIfTest::pinningComparesAgainstThePinnedResult() {
  WhatIfPanel panel;
  QSignalSpy shown(&panel, &WhatIfPanel::resultShown);
  QSignalSpy compared(&panel, &WhatIfPanel::comparisonChanged);
  QVERIFY(shown.wait(20000));
  WhatIfResultPtr first = panel.current();
  panel.pinCurrent();
  QCOMPARE(compared.count(), 1);
  WhatIfSettings s = panel.settings();
  s.ddp.setBucketCapMb(5);
  panel.setSettings(s);
  QTRY_VERIFY_WITH_TIMEOUT(panel.current()->settings == s, 20000);
  auto a = compared.last().at(0).value<WhatIfResultPtr>();
  auto b = compared.last().at(1).value<WhatIfResultPtr>();
  QCOMPARE(b, first);  // the pinned result is run B
  QCOMPARE(a->settings, s);
}

void WhatIfTest::sweepMarksTheBestCapAndOpensAPoint() {
  SweepPanel panel;
  panel.resize(1000, 600);
  WhatIfSettings base;
  QVERIFY(sweepTo(panel, base, "8,32"));
  const SweepResult& r = *panel.result();
  QCOMPARE(r.points.size(), size_t(16));
  QCOMPARE(r.bestPerWorldSize.size(), size_t(2));
  for (const SweepPoint& p : r.points) QVERIFY(r.points[r.best].stepTime <= p.stepTime);
  // Each point equals `ddpscope simulate` at that setting (spot check the best one).
  QCOMPARE(r.points[r.best].stepTime, cliStepTime(base, r.points[r.best]));
  // Clicking near a point picks that configuration.
  QSignalSpy chosen(&panel, &SweepPanel::configurationChosen);
  auto picked = panel.settingsForPoint(32, 22.0);
  QVERIFY(picked.has_value());
  QCOMPARE(picked->worldSize, 32);
  QCOMPARE(picked->ddp.bucketCapMb, 25.0);
  QVERIFY(!panel.grab().isNull());
}

// The GUI's side of the settings round trip (tests/cli/settings_round_trip_test.cpp is
// replay's): every DDP setting a simulation was run with is what the opened trace shows.
void WhatIfTest::aSimulatedTraceOpensWithEveryDdpSetting() {
  WhatIfSettings s;
  s.worldSize = 16;
  s.ddp.setBucketCapMb(5);
  s.ddp.firstBucketBytes = 524288;
  s.ddp.findUnusedParameters = true;
  s.ddp.staticGraph = true;
  s.ddp.gradientAsBucketView = true;
  s.ddp.noSyncPeriod = 2;
  s.ddp.commHook.kind = ddp::CommHookKind::kPowerSgd;
  s.ddp.commHook.powerSgdRank = 2;
  s.ddp.broadcastBuffers = false;
  s.ddp.profile = ddp::SemanticsProfile::kV1_13;
  const QString path = QDir::temp().filePath("ddpscope-whatif-round-trip.json");
  std::vector<std::string> args = s.cliArgs();
  args.push_back("--trace");
  args.push_back(path.toStdString());
  std::ostringstream out, err;
  QCOMPARE(cli::runCli(args, out, err), 0);
  auto document = loadTraceDocument(path);
  QVERIFY2(document.isOk(), document.status().message().c_str());
  QVERIFY((*document)->ddpSettings().has_value());
  ddp::DdpConfig shown = *(*document)->ddpSettings();
  shown.worldSize = s.ddp.worldSize;  // the layout's, not a DDP setting
  QVERIFY2(shown == s.ddp, shown.toString().c_str());
  QCOMPARE((*document)->worldSize(), 16);
}

// The what-if states its workload with the block `ddpscope simulate` prints for the same
// settings.
void WhatIfTest::panelStatesTheWorkloadLikeTheCli() {
  WhatIfPanel panel;
  QSignalSpy shown(&panel, &WhatIfPanel::resultShown);
  QVERIFY(shown.wait(20000));
  auto* label = panel.findChild<QLabel*>("whatIfWorkload");
  QVERIFY(label);
  QVERIFY(label->text().contains("batch 8 per rank (512 global), sequence 1024"));
  const std::string text = label->toolTip().toStdString();
  QVERIFY2(text.find("workload (what the numbers assume):") != std::string::npos, text.c_str());
  std::vector<std::string> args = panel.settings().cliArgs();
  std::ostringstream out, err;
  QCOMPARE(cli::runCli(args, out, err), 0);
  QVERIFY2(out.str().find(text) != std::string::npos, (out.str() + "\n---\n" + text).c_str());
}

// The cluster list comes from the built-in registry: the Blackwell clusters are in it, the
// panel simulates on them, and the sweep chart runs on an NVL72 rack and two racks.
void WhatIfTest::blackwellClustersAreListedAndSweep() {
  WhatIfPanel whatIf;
  auto* clusters = whatIf.findChild<QComboBox*>("whatIfCluster");
  QVERIFY(clusters);
  QVERIFY(clusters->findText("dgx-b200") >= 0);
  QVERIFY(clusters->findText("gb200-nvl72") >= 0);
  QCOMPARE(clusters->count(), static_cast<int>(sim::builtinClusterNames().size()));
  WhatIfSettings s;
  s.model = "gpt2-xl";
  s.cluster = "gb200-nvl72";
  s.worldSize = 72;
  whatIf.setSettings(s);
  QCOMPARE(whatIf.settings().cluster, std::string("gb200-nvl72"));
  QCOMPARE(whatIf.settings().worldSize, 72);

  SweepPanel sweep;  // the sweep chart: one rack and two racks
  QVERIFY(sweepTo(sweep, s, "72,144"));
  const SweepResult& r = *sweep.result();
  QCOMPARE(r.bestPerWorldSize.size(), size_t(2));
  QCOMPARE(r.points[r.best].stepTime, cliStepTime(s, r.points[r.best]));
}

namespace {

sim::ClusterSpec builtinCluster(const std::string& name) {
  auto cluster = sim::loadBuiltinCluster(name);
  if (!cluster.isOk()) qFatal("%s", cluster.status().message().c_str());
  return *cluster;
}

std::vector<int> comboWorldSizes(const QComboBox& box) {
  std::vector<int> sizes;
  for (int i = 0; i < box.count(); ++i) sizes.push_back(box.itemData(i).toInt());
  return sizes;
}

}  // namespace

// Offered world sizes are part of one node or whole nodes of the cluster, and each one is a
// layout the simulator accepts (128/256/512 are not, on a 72-GPU NVL72 rack).
void WhatIfTest::offeredWorldSizesFollowGpusPerNode() {
  QCOMPARE(offeredWorldSizes(builtinCluster("dgx-a100")),
           (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}));
  QCOMPARE(offeredWorldSizes(builtinCluster("gb200-nvl72")),
           (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 72, 144, 288, 576, 1152, 2304, 4608}));
  QCOMPARE(offeredWorldSizes(builtinCluster("cpu-mpi")),
           (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  for (const std::string& name : sim::builtinClusterNames()) {
    const sim::ClusterSpec cluster = builtinCluster(name);
    for (int w : offeredWorldSizes(cluster)) {
      QVERIFY2(sim::makeWorldLayout(cluster, std::nullopt, w).isOk(),
               (name + " " + std::to_string(w)).c_str());
    }
  }
  const sim::ClusterSpec nvl72 = builtinCluster("gb200-nvl72");
  QCOMPARE(fittingWorldSize(nvl72, 144), 144);
  QCOMPARE(fittingWorldSize(nvl72, 64), 64);  // part of one rack
  QCOMPARE(fittingWorldSize(nvl72, 128), 72);
  QCOMPARE(fittingWorldSize(nvl72, 512), 288);
  QCOMPARE(fittingWorldSize(builtinCluster("dgx-a100"), 72), 72);  // 9 nodes
  QCOMPARE(defaultSweepWorldSizes(builtinCluster("dgx-a100")), std::string("8,16,32,64"));
  QCOMPARE(defaultSweepWorldSizes(nvl72), std::string("72,144,288,576"));
}

// Choosing a cluster refills the panel's world-size list; a size the new cluster rejects
// becomes the largest offered size below it, one the cluster accepts is kept.
void WhatIfTest::worldSizeListFollowsTheChosenCluster() {
  WhatIfPanel panel;
  auto* clusters = panel.findChild<QComboBox*>("whatIfCluster");
  auto* worlds = panel.findChild<QComboBox*>("whatIfWorldSize");
  QVERIFY(clusters && worlds);
  QCOMPARE(panel.settings().cluster, std::string("dgx-a100"));
  QCOMPARE(comboWorldSizes(*worlds), offeredWorldSizes(builtinCluster("dgx-a100")));
  worlds->setCurrentIndex(worlds->findData(128));
  QCOMPARE(panel.settings().worldSize, 128);

  clusters->setCurrentText("gb200-nvl72");
  QCOMPARE(comboWorldSizes(*worlds), offeredWorldSizes(builtinCluster("gb200-nvl72")));
  QCOMPARE(worlds->findData(128), -1);
  QCOMPARE(panel.settings().worldSize, 72);
  QSignalSpy shown(&panel, &WhatIfPanel::resultShown);
  QVERIFY(shown.wait(60000));
  QCOMPARE(panel.current()->settings.cluster, std::string("gb200-nvl72"));
  QCOMPARE(panel.current()->settings.worldSize, 72);

  worlds->setCurrentIndex(worlds->findData(144));
  clusters->setCurrentText("dgx-h100");  // 144 = 18 nodes of 8: kept, listed in order
  QCOMPARE(panel.settings().worldSize, 144);
  std::vector<int> expected = offeredWorldSizes(builtinCluster("dgx-h100"));
  expected.insert(expected.begin() + 8, 144);  // after 128
  QCOMPARE(comboWorldSizes(*worlds), expected);
}

// The sweep's world sizes follow a new cluster while they are the previous cluster's defaults;
// sizes the user typed are kept.
void WhatIfTest::sweepDefaultsFollowTheCluster() {
  SweepPanel sweep;
  auto* edit = sweep.findChild<QLineEdit*>();
  QVERIFY(edit);
  QCOMPARE(edit->text(), QString("8,16,32,64"));
  WhatIfSettings s;
  s.cluster = "gb200-nvl72";
  sweep.setBaseSettings(s);
  QCOMPARE(edit->text(), QString("72,144,288,576"));
  s.cluster = "dgx-b200";
  sweep.setBaseSettings(s);
  QCOMPARE(edit->text(), QString("8,16,32,64"));
  sweep.setWorldSizes("16,24");
  s.cluster = "gb200-nvl72";
  sweep.setBaseSettings(s);
  QCOMPARE(edit->text(), QString("16,24"));
}

QTEST_MAIN(WhatIfTest)
#include "whatif_test.moc"
