#include "gui/widgets/whatif_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "api/cluster_settings.h"
#include "api/ddp_flags.h"
#include "api/model_request.h"
#include "api/simulation_json.h"
#include "base/check.h"
#include "gui/model/world_sizes.h"
#include "gui/widgets/time_axis.h"
#include "gui/widgets/timeline_view.h"

namespace ddpscope::gui {

namespace {
constexpr int kCapCount = static_cast<int>(std::size(kTypicalBucketCapsMb));
}  // namespace

WhatIfPanel::WhatIfPanel(QWidget* parent)
    : QWidget(parent), m_runner(new WhatIfRunner(this)), m_zoom(new ZoomStack(this)) {
  auto* outer = new QHBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  auto* controls = new QWidget(this);
  controls->setMaximumWidth(330);
  auto* form = new QFormLayout(controls);
  m_model = new QComboBox(controls);
  for (const std::string& name : models::zooModelNames())
    m_model->addItem(QString::fromStdString(name));
  m_cluster = new QComboBox(controls);
  m_cluster->setObjectName("whatIfCluster");
  for (const std::string& name : sim::builtinClusterNames())
    m_cluster->addItem(QString::fromStdString(name));
  m_worldSize = new QComboBox(controls);
  m_worldSize->setObjectName("whatIfWorldSize");
  offerWorldSizes();
  // Before every other connection: the world sizes follow the cluster before it re-simulates.
  connect(m_cluster, &QComboBox::currentIndexChanged, this, &WhatIfPanel::offerWorldSizes);
  m_cap = new QSlider(Qt::Horizontal, controls);
  m_cap->setRange(0, kCapCount - 1);
  m_cap->setTickPosition(QSlider::TicksBelow);
  m_cap->setTickInterval(1);
  m_cap->setPageStep(1);
  m_capLabel = new QLabel(controls);
  auto* capRow = new QHBoxLayout();
  capRow->addWidget(m_cap, 1);
  capRow->addWidget(m_capLabel);
  m_findUnused = new QCheckBox(tr("find_unused_parameters"), controls);
  m_staticGraph = new QCheckBox(tr("static_graph"), controls);
  m_noSync = new QSpinBox(controls);
  m_noSync->setRange(1, 64);
  m_noSync->setToolTip(tr("gradient accumulation: K−1 no_sync() steps, then one synced step"));
  m_hook = new QComboBox(controls);
  m_hook->addItems({"none", "allreduce", "fp16", "bf16", "powersgd"});
  form->addRow(tr("Model"), m_model);
  form->addRow(tr("Cluster"), m_cluster);
  form->addRow(tr("World size"), m_worldSize);
  form->addRow(tr("bucket_cap_mb"), capRow);
  form->addRow(QString(), m_findUnused);
  form->addRow(QString(), m_staticGraph);
  form->addRow(tr("no_sync K"), m_noSync);
  form->addRow(tr("Comm hook"), m_hook);
  m_pin = new QPushButton(tr("Compare with current"), controls);
  m_pin->setToolTip(tr("Pin this result as run B; later changes are compared against it"));
  m_open = new QPushButton(tr("Open in Timeline tab"), controls);
  form->addRow(m_pin);
  form->addRow(m_open);
  m_metrics = new QLabel(controls);
  m_metrics->setTextFormat(Qt::RichText);
  m_metrics->setTextInteractionFlags(Qt::TextSelectableByMouse);
  form->addRow(m_metrics);
  m_status = new QLabel(controls);
  m_status->setWordWrap(true);
  form->addRow(m_status);
  m_workload = new QLabel(controls);
  m_workload->setObjectName("whatIfWorkload");
  m_workload->setWordWrap(true);
  form->addRow(m_workload);
  outer->addWidget(controls);

  auto* right = new QVBoxLayout();
  right->setSpacing(0);
  m_axis = new TimeAxis(m_zoom, this);
  m_view = new TimelineView(m_zoom, this);
  right->addWidget(m_axis);
  right->addWidget(m_view, 1);
  right->addWidget(new CategoryLegend(this));
  outer->addLayout(right, 1);

  // Defaults: gpt2-small on dgx-a100, 64 ranks, 25 MiB.
  WhatIfSettings defaults;
  defaults.worldSize = 64;
  m_blockChanges = true;
  setSettings(defaults);
  m_blockChanges = false;

  for (QComboBox* box : {m_model, m_cluster, m_worldSize, m_hook}) {
    connect(box, &QComboBox::currentIndexChanged, this, &WhatIfPanel::onChanged);
  }
  connect(m_cap, &QSlider::valueChanged, this, [this]() {
    updateCapLabel();
    onChanged();
  });
  connect(m_findUnused, &QCheckBox::toggled, this, &WhatIfPanel::onChanged);
  connect(m_staticGraph, &QCheckBox::toggled, this, &WhatIfPanel::onChanged);
  connect(m_noSync, &QSpinBox::valueChanged, this, &WhatIfPanel::onChanged);
  connect(m_pin, &QPushButton::clicked, this, &WhatIfPanel::pinCurrent);
  connect(m_open, &QPushButton::clicked, this, [this]() {
    if (m_current) emit openInTimeline(m_current);
  });
  connect(m_runner, &WhatIfRunner::resultReady, this, &WhatIfPanel::onResult);
  connect(m_runner, &WhatIfRunner::failed, this, [this](const QString& message) {
    m_status->setText(tr("<span style='color:#c62828'>%1</span>").arg(message.toHtmlEscaped()));
  });
  m_changeClock.start();
  m_runner->request(settings());
}

void WhatIfPanel::offerWorldSizes() {
  auto cluster = sim::loadBuiltinCluster(m_cluster->currentText().toStdString());
  if (!cluster.isOk()) return;  // the list holds built-in names only
  const int current = m_worldSize->count() > 0 ? m_worldSize->currentData().toInt() : 0;
  std::vector<int> sizes = offeredWorldSizes(*cluster);
  const int keep = current > 0 ? fittingWorldSize(*cluster, current) : 0;
  if (keep > 0 && std::find(sizes.begin(), sizes.end(), keep) == sizes.end()) {
    sizes.insert(std::upper_bound(sizes.begin(), sizes.end(), keep), keep);
  }
  const QSignalBlocker blocker(m_worldSize);  // one re-simulation, by the cluster's change
  m_worldSize->clear();
  for (int w : sizes) m_worldSize->addItem(QString::number(w), w);
  if (keep > 0) m_worldSize->setCurrentIndex(m_worldSize->findData(keep));
}

void WhatIfPanel::updateCapLabel() {
  m_capLabel->setText(tr("%1 MiB").arg(kTypicalBucketCapsMb[m_cap->value()]));
}

WhatIfSettings WhatIfPanel::settings() const {
  WhatIfSettings s;
  s.model = m_model->currentText().toStdString();
  s.cluster = m_cluster->currentText().toStdString();
  s.worldSize = m_worldSize->currentData().toInt();
  s.ddp = WhatIfSettings::explicitCap(kTypicalBucketCapsMb[m_cap->value()]);
  s.ddp.findUnusedParameters = m_findUnused->isChecked();
  s.ddp.staticGraph = m_staticGraph->isChecked();
  s.ddp.noSyncPeriod = m_noSync->value();
  // The combo box lists only the hook names ddp's settings module accepts.
  const Status hook =
      api::applyDdpSetting(api::DdpSetting::kCommHook, m_hook->currentText().toStdString(), s.ddp);
  DDPSCOPE_CHECK_MSG(hook.isOk(), hook.message().c_str());
  return s;
}

void WhatIfPanel::setSettings(const WhatIfSettings& s) {
  bool wasBlocked = m_blockChanges;
  m_blockChanges = true;
  m_model->setCurrentText(QString::fromStdString(s.model));
  m_cluster->setCurrentText(QString::fromStdString(s.cluster));
  int w = m_worldSize->findData(s.worldSize);
  if (w < 0) {
    m_worldSize->addItem(QString::number(s.worldSize), s.worldSize);
    w = m_worldSize->count() - 1;
  }
  m_worldSize->setCurrentIndex(w);
  int best = 0;
  for (int i = 0; i < kCapCount; ++i) {
    if (std::fabs(kTypicalBucketCapsMb[i] - s.ddp.bucketCapMb) <
        std::fabs(kTypicalBucketCapsMb[best] - s.ddp.bucketCapMb)) {
      best = i;
    }
  }
  m_cap->setValue(best);
  updateCapLabel();
  m_findUnused->setChecked(s.ddp.findUnusedParameters);
  m_staticGraph->setChecked(s.ddp.staticGraph);
  m_noSync->setValue(static_cast<int>(s.ddp.noSyncPeriod));
  m_hook->setCurrentText(
      QString::fromStdString(std::string(ddp::commHookKindName(s.ddp.commHook.kind))));
  m_blockChanges = wasBlocked;
  onChanged();
}

void WhatIfPanel::onChanged() {
  if (m_blockChanges) return;
  m_changeClock.start();
  m_status->setText(tr("simulating…"));
  m_runner->request(settings());
}

void WhatIfPanel::onResult(const WhatIfResultPtr& result) {
  m_current = result;
  const sim::SimSummary& s = result->summary;
  m_displayed.clear();
  m_displayed["step_time_ms"] = s.stepTime.toMillis();
  m_displayed["forward_ms"] = s.forward.toMillis();
  m_displayed["backward_ms"] = s.backward.toMillis();
  m_displayed["comm_ms"] = s.comm.toMillis();
  m_displayed["exposed_comm_ms"] = s.exposedComm.toMillis();
  m_displayed["overlap_percent"] = s.overlapPercent;
  m_displayed["num_buckets"] = s.numBuckets;
  auto row = [](const QString& name, const QString& value, bool red = false) {
    return QStringLiteral("<tr><td>%1</td><td align='right'>%2%3%4</td></tr>")
        .arg(name, red ? "<span style='color:#c62828'><b>" : "<b>", value,
             red ? "</b></span>" : "</b>");
  };
  QString html = QStringLiteral("<table cellspacing='2'>");
  html += row(tr("step time"), QString::number(s.stepTime.toMillis(), 'f', 3) + " ms");
  html += row(tr("forward"), QString::number(s.forward.toMillis(), 'f', 3) + " ms");
  html += row(tr("backward"), QString::number(s.backward.toMillis(), 'f', 3) + " ms");
  html += row(tr("communication"), QString::number(s.comm.toMillis(), 'f', 3) + " ms");
  html += row(tr("exposed comm"), QString::number(s.exposedComm.toMillis(), 'f', 3) + " ms",
              s.exposedComm > Nanos(0));
  html += row(tr("overlap (HTA)"), QString::number(s.overlapPercent, 'f', 2) + " %");
  html += row(tr("buckets"), QString::number(s.numBuckets));
  html += QStringLiteral("</table>");
  m_metrics->setText(html);
  // What the numbers assume: a short line here, and as its tooltip the same block `ddpscope
  // simulate` prints (sim/engine/workload.h).
  const sim::Workload& w = s.workload;
  QString inputs = tr("batch %1 per rank (%2 global)").arg(w.batchPerRank).arg(w.globalBatch);
  if (w.seqLen > 0) inputs += tr(", sequence %1").arg(w.seqLen);
  if (w.imageSize > 0) inputs += tr(", images %1 px").arg(w.imageSize);
  m_workload->setText(
      tr("Assumes %1, %2 compute, %3. Hover for the whole workload.")
          .arg(inputs, QString::fromStdString(w.dtype), QString::fromStdString(w.optimizer)));
  m_workload->setToolTip(QString::fromStdString(sim::workloadText(w)));

  if (result->document) {
    Nanos start = result->document->startTime();
    m_view->setDocument(result->document, start);
    m_zoom->updateFullRange(Nanos(0), result->document->endTime() - start);
  }
  if (m_pinned) emit comparisonChanged(m_current, m_pinned);
  if (result->settings == settings()) {
    m_view->repaint();  // synchronous: the latency includes the paint
    m_lastLatencyMs = static_cast<double>(m_changeClock.nsecsElapsed()) / 1e6;
    m_status->setText(tr("%1 · simulated in %2 ms · change → repaint %3 ms")
                          .arg(QString::fromStdString(result->settings.describe()))
                          .arg(static_cast<double>(result->simulateNs) / 1e6, 0, 'f', 1)
                          .arg(m_lastLatencyMs, 0, 'f', 1));
    emit resultShown(m_lastLatencyMs);
  }
}

void WhatIfPanel::pinCurrent() {
  if (!m_current) return;
  m_pinned = m_current;
  m_pin->setText(
      tr("Compare with current (pinned: cap %1 MiB)").arg(m_pinned->settings.ddp.bucketCapMb));
  emit comparisonChanged(m_current, m_pinned);
}

}  // namespace ddpscope::gui
