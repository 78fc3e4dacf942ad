#include "gui/widgets/sweep_panel.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPushButton>
#include <QScatterSeries>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>

namespace ddpscope::gui {
namespace {

QColor worldSizeColor(size_t index) {
  const QColor palette[] = {QColor(0x1F, 0x77, 0xB4), QColor(0xFF, 0x7F, 0x0E),
                            QColor(0x2C, 0xA0, 0x2C), QColor(0xD6, 0x27, 0x28),
                            QColor(0x94, 0x67, 0xBD), QColor(0x8C, 0x56, 0x4B),
                            QColor(0xE3, 0x77, 0xC2), QColor(0x7F, 0x7F, 0x7F)};
  return palette[index % std::size(palette)];
}

QString ms(Nanos t) {
  return QString::number(t.toMillis(), 'f', 3);
}

QString gainText(double percent) {
  return QStringLiteral("%1% %2")
      .arg(std::fabs(percent), 0, 'f', 1)
      .arg(percent < 0 ? QObject::tr("slower") : QObject::tr("faster"));
}

// The columns of the plan table: the planner's model, then the full simulation.
const char* const kPlanColumns[] = {"gradients", "MiB", "cap",        "ready",
                                    "launch",    "end", "sim launch", "sim end"};

}  // namespace

SweepPanel::SweepPanel(QWidget* parent) : QWidget(parent) {
  qRegisterMetaType<WhatIfSettings>();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel(tr("World sizes:"), this));
  m_worldSizes = new QLineEdit(QStringLiteral("8,16,32,64"), this);
  m_worldSizes->setMaximumWidth(200);
  bar->addWidget(m_worldSizes);
  m_run = new QPushButton(tr("Run sweep"), this);
  bar->addWidget(m_run);
  m_planButton = new QPushButton(tr("Plan"), this);
  m_planButton->setObjectName("sweepPlan");
  m_planButton->setToolTip(
      tr("Plan the buckets (as `ddpscope plan`): the default and best uniform bucket_cap_mb and "
         "the best per-bucket layout (bucket_cap_mb_list, torch 2.15) at each world size"));
  bar->addWidget(m_planButton);
  m_status = new QLabel(tr("Bucket caps 1, 2, 5, 10, 25, 50, 100, 200 MiB; model, cluster and "
                           "flags from the What-if tab. Click a point to open its timeline."),
                        this);
  m_status->setObjectName("sweepStatus");
  m_status->setWordWrap(true);
  bar->addWidget(m_status, 1);
  layout->addLayout(bar);
  m_chartView = new QChartView(this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  layout->addWidget(m_chartView, 3);

  m_planArea = new QWidget(this);
  auto* planLayout = new QVBoxLayout(m_planArea);
  planLayout->setContentsMargins(0, 0, 0, 0);
  auto* planBar = new QHBoxLayout();
  planBar->addWidget(new QLabel(tr("Plan at"), m_planArea));
  m_planWorldSize = new QComboBox(m_planArea);
  m_planWorldSize->setObjectName("planWorldSize");
  planBar->addWidget(m_planWorldSize);
  m_openPlan = new QPushButton(tr("Open planned timeline"), m_planArea);
  m_openPlan->setObjectName("openPlanTimeline");
  planBar->addWidget(m_openPlan);
  m_planSummary = new QLabel(m_planArea);
  m_planSummary->setObjectName("planSummary");
  m_planSummary->setWordWrap(true);
  m_planSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  planBar->addStretch(1);
  planLayout->addLayout(planBar);
  planLayout->addWidget(m_planSummary);  // its own row: two lines, the DDP call on the second
  m_planTable = new QTableWidget(m_planArea);
  m_planTable->setObjectName("planTable");
  m_planTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_planTable->setColumnCount(static_cast<int>(std::size(kPlanColumns)));
  QStringList headers;
  for (const char* column : kPlanColumns) headers << tr(column);
  m_planTable->setHorizontalHeaderLabels(headers);
  m_planTable->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_planTable->setToolTip(
      tr("Buckets in reduction order; gradients are positions in gradient-ready order; cap is "
         "the bucket_cap_mb_list entry; ready/launch/end: the planner's model, sim launch/end: "
         "the full simulation (ms from the backward's start)"));
  planLayout->addWidget(m_planTable, 1);
  m_planArea->setVisible(false);
  layout->addWidget(m_planArea, 2);

  connect(m_run, &QPushButton::clicked, this, &SweepPanel::runSweep);
  connect(m_planButton, &QPushButton::clicked, this, &SweepPanel::runPlan);
  connect(m_planWorldSize, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (index >= 0) showPlanDetails(static_cast<size_t>(index));
  });
  connect(m_openPlan, &QPushButton::clicked, this, [this]() {
    if (auto s = shownPlanSettings()) emit configurationChosen(*s);
  });
}

void SweepPanel::setWorldSizes(const QString& commaList) {
  m_worldSizes->setText(commaList);
}

std::optional<std::vector<int>> SweepPanel::parseWorldSizes() {
  std::vector<int> worldSizes;
  for (const QString& part : m_worldSizes->text().split(',', Qt::SkipEmptyParts)) {
    bool ok = false;
    int w = part.trimmed().toInt(&ok);
    if (!ok || w <= 0) {
      m_status->setText(tr("World sizes: '%1' is not a positive whole number; enter e.g. "
                           "8,16,32,64")
                            .arg(part.trimmed().toHtmlEscaped()));
      return std::nullopt;
    }
    worldSizes.push_back(w);
  }
  if (worldSizes.empty()) {
    m_status->setText(tr("Enter world sizes, e.g. 8,16,32,64"));
    return std::nullopt;
  }
  return worldSizes;
}

template <typename T, typename Job, typename Show>
void SweepPanel::runOnWorker(const QString& errorPrefix, Job job, Show show,
                             void (SweepPanel::*done)()) {
  m_run->setEnabled(false);
  m_planButton->setEnabled(false);
  using Result = std::shared_ptr<StatusOr<T>>;
  auto* watcher = new QFutureWatcher<Result>(this);
  connect(watcher, &QFutureWatcher<Result>::finished, this,
          [this, watcher, show, errorPrefix, done]() {
            Result result = watcher->result();
            watcher->deleteLater();
            m_run->setEnabled(true);
            m_planButton->setEnabled(true);
            if (!result->isOk()) {
              m_status->setText(
                  tr("<span style='color:#c62828'>%1%2</span>")
                      .arg(errorPrefix,
                           QString::fromStdString(result->status().message()).toHtmlEscaped()));
            } else {
              show(**result);
            }
            emit(this->*done)();
          });
  watcher->setFuture(QtConcurrent::run([job]() { return std::make_shared<StatusOr<T>>(job()); }));
}

void SweepPanel::runSweep() {
  const std::optional<std::vector<int>> parsed = parseWorldSizes();
  if (!parsed) return;
  const std::vector<int> worldSizes = *parsed;
  std::vector<double> caps(std::begin(kTypicalBucketCapsMb), std::end(kTypicalBucketCapsMb));
  m_status->setText(tr("sweeping %1 configurations…").arg(caps.size() * worldSizes.size()));
  const WhatIfSettings base = m_base;
  runOnWorker<SweepResult>(
      QString(), [base, caps, worldSizes]() { return gui::runSweep(base, caps, worldSizes); },
      [this](const SweepResult& result) { showResult(result); }, &SweepPanel::sweepFinished);
}

void SweepPanel::showResult(const SweepResult& result) {
  m_result = result;
  m_plan.reset();  // a new chart: showPlan adds its plan after this
  m_planArea->setVisible(false);
  auto* chart = new QChart();
  chart->setTitle(
      tr("%1 on %2: step time (solid) and exposed comm (dashed) vs bucket_cap_mb; "
         "★ = best cap per world size")
          .arg(QString::fromStdString(m_base.model), QString::fromStdString(m_base.cluster)));
  auto* axisX = new QLogValueAxis();
  axisX->setBase(10);
  axisX->setLabelFormat("%g");
  axisX->setTitleText(tr("bucket_cap_mb (MiB, log scale)"));
  axisX->setRange(result.capsMb.front() * 0.8, result.capsMb.back() * 1.25);
  axisX->setMinorTickCount(8);
  auto* axisY = new QValueAxis();
  axisY->setTitleText(tr("ms"));
  double maxY = 0;
  for (const SweepPoint& p : result.points) maxY = std::max(maxY, p.stepTime.toMillis());
  axisY->setRange(0, maxY * 1.08);
  axisY->applyNiceNumbers();
  chart->addAxis(axisX, Qt::AlignBottom);
  chart->addAxis(axisY, Qt::AlignLeft);
  auto* best = new QScatterSeries();
  best->setName(tr("best cap"));
  best->setMarkerShape(QScatterSeries::MarkerShapeStar);
  best->setMarkerSize(18);
  best->setColor(QColor(0xE5, 0x39, 0x35));
  best->setBorderColor(QColor(0x80, 0x10, 0x10));
  for (size_t w = 0; w < result.worldSizes.size(); ++w) {
    int worldSize = result.worldSizes[w];
    QColor color = worldSizeColor(w);
    auto* step = new QLineSeries();
    step->setName(tr("step, %1 ranks").arg(worldSize));
    step->setPen(QPen(color, 2.5));
    step->setPointsVisible(true);
    auto* exposed = new QLineSeries();
    exposed->setName(tr("exposed, %1 ranks").arg(worldSize));
    exposed->setPen(QPen(color, 1.5, Qt::DashLine));
    exposed->setPointsVisible(true);
    for (const SweepPoint& p : result.points) {
      if (p.worldSize != worldSize) continue;
      step->append(p.bucketCapMb, p.stepTime.toMillis());
      exposed->append(p.bucketCapMb, p.exposedComm.toMillis());
    }
    for (QLineSeries* series : {step, exposed}) {
      chart->addSeries(series);
      series->attachAxis(axisX);
      series->attachAxis(axisY);
      connect(series, &QLineSeries::clicked, this,
              [this, worldSize](const QPointF& point) { onPointClicked(worldSize, point); });
    }
    const SweepPoint& b = result.points[result.bestPerWorldSize[w]];
    best->append(b.bucketCapMb, b.stepTime.toMillis());
  }
  chart->addSeries(best);
  best->attachAxis(axisX);
  best->attachAxis(axisY);
  connect(best, &QScatterSeries::clicked, this, [this](const QPointF& point) {
    // The star of which world size: the best point at that position.
    if (!m_result) return;
    for (size_t w = 0; w < m_result->worldSizes.size(); ++w) {
      const SweepPoint& b = m_result->points[m_result->bestPerWorldSize[w]];
      if (std::fabs(b.bucketCapMb - point.x()) < 1e-9 &&
          std::fabs(b.stepTime.toMillis() - point.y()) < 1e-6) {
        onPointClicked(b.worldSize, point);
        return;
      }
    }
  });
  chart->legend()->setAlignment(Qt::AlignRight);
  QChart* old = m_chartView->chart();
  m_chartView->setChart(chart);
  delete old;
  const SweepPoint& top = result.points[result.best];
  m_status->setText(tr("Best: %1 ranks, bucket_cap_mb %2 → step %3 ms (exposed comm %4 ms). "
                       "Click a point to open its timeline.")
                        .arg(top.worldSize)
                        .arg(top.bucketCapMb)
                        .arg(top.stepTime.toMillis(), 0, 'f', 3)
                        .arg(top.exposedComm.toMillis(), 0, 'f', 3));
}

void SweepPanel::setBaseSettings(const WhatIfSettings& base) {
  if (base.cluster != m_base.cluster) {
    auto before = sim::loadBuiltinCluster(m_base.cluster);
    auto after = sim::loadBuiltinCluster(base.cluster);
    if (before.isOk() && after.isOk() &&
        m_worldSizes->text().toStdString() == defaultSweepWorldSizes(*before)) {
      m_worldSizes->setText(QString::fromStdString(defaultSweepWorldSizes(*after)));
    }
  }
  m_base = base;
}

std::optional<WhatIfSettings> SweepPanel::settingsForPoint(int worldSize, double capMb) const {
  if (!m_result) return std::nullopt;
  const SweepPoint* nearest = nullptr;
  for (const SweepPoint& p : m_result->points) {
    if (p.worldSize != worldSize) continue;
    if (!nearest || std::fabs(std::log(p.bucketCapMb / capMb)) <
                        std::fabs(std::log(nearest->bucketCapMb / capMb))) {
      nearest = &p;
    }
  }
  if (!nearest) return std::nullopt;
  WhatIfSettings s = m_base;
  s.worldSize = nearest->worldSize;
  s.ddp.setBucketCapMb(nearest->bucketCapMb);
  return s;
}

void SweepPanel::onPointClicked(int worldSize, const QPointF& point) {
  if (auto s = settingsForPoint(worldSize, std::max(point.x(), 1e-3))) emit configurationChosen(*s);
}

void SweepPanel::runPlan() {
  const std::optional<std::vector<int>> parsed = parseWorldSizes();
  if (!parsed) return;
  const std::vector<int> worldSizes = *parsed;
  std::vector<double> caps(std::begin(kTypicalBucketCapsMb), std::end(kTypicalBucketCapsMb));
  m_status->setText(tr("planning buckets at %n world size(s)…", "", int(worldSizes.size())));
  const WhatIfSettings base = m_base;
  runOnWorker<PlanOutcome>(
      tr("plan: "), [base, caps, worldSizes]() { return gui::runPlan(base, caps, worldSizes); },
      [this, base](const PlanOutcome& outcome) {
        m_planBase = base;
        showPlan(outcome);
      },
      &SweepPanel::planFinished);
}

void SweepPanel::showPlan(const PlanOutcome& outcome) {
  showResult(outcome.sweep);
  m_plan = outcome;
  QChart* chart = m_chartView->chart();
  const QList<QAbstractAxis*> xAxes = chart->axes(Qt::Horizontal);
  const QList<QAbstractAxis*> yAxes = chart->axes(Qt::Vertical);
  auto* axisX = qobject_cast<QLogValueAxis*>(xAxes.value(0));
  auto* axisY = qobject_cast<QValueAxis*>(yAxes.value(0));
  for (size_t w = 0; w < outcome.plans.size(); ++w) {
    const sim::PlanResult& plan = outcome.plans[w];
    if (!plan.listSupported || axisX == nullptr || axisY == nullptr) continue;
    const double stepMs = plan.planned.stepTime.toMillis();
    auto* line = new QLineSeries();
    line->setName(tr("planned list, %1 ranks").arg(outcome.sweep.worldSizes[w]));
    line->setPen(QPen(worldSizeColor(w), 2, Qt::DotLine));
    line->append(axisX->min(), stepMs);
    line->append(axisX->max(), stepMs);
    chart->addSeries(line);
    line->attachAxis(axisX);
    line->attachAxis(axisY);
    if (stepMs > axisY->max()) axisY->setMax(stepMs * 1.08);
  }
  chart->setTitle(chart->title() + tr("; dotted = planned bucket_cap_mb_list"));
  const QSignalBlocker block(m_planWorldSize);
  m_planWorldSize->clear();
  for (int worldSize : outcome.sweep.worldSizes) {
    m_planWorldSize->addItem(tr("%1 ranks").arg(worldSize), worldSize);
  }
  m_planWorldSize->setCurrentIndex(0);
  m_planArea->setVisible(true);
  showPlanDetails(0);
}

void SweepPanel::showPlanDetails(size_t index) {
  if (!m_plan || index >= m_plan->plans.size()) return;
  const sim::PlanResult& plan = m_plan->plans[index];
  const sim::SweepPoint& def = plan.uniform.points[plan.defaultPoint];
  const sim::SweepPoint& uniform = plan.uniform.points[plan.bestUniformPoint];
  QString text = tr("%1 ranks: default (bucket_cap_mb left out) %2 ms/step; best uniform "
                    "bucket_cap_mb=%3 %4 ms (%5)")
                     .arg(m_plan->sweep.worldSizes[index])
                     .arg(ms(def.summary.stepTime))
                     .arg(uniform.capMb)
                     .arg(ms(uniform.summary.stepTime))
                     .arg(gainText(plan.uniformGainPercent));
  if (plan.listSupported) {
    text += tr("; planned %1 buckets %2 ms (%3 than the default, %4 than the best uniform)")
                .arg(plan.layout.buckets.size())
                .arg(ms(plan.planned.stepTime))
                .arg(gainText(plan.gainOverDefaultPercent))
                .arg(gainText(plan.gainOverUniformPercent));
  } else {
    text += tr("; torch %1 has no bucket_cap_mb_list: only uniform caps can be expressed")
                .arg(QString::fromStdString(
                    std::string(ddp::semanticsProfileName(m_planBase.ddp.profile))));
  }
  text += tr("<br><code>DistributedDataParallel(model, %1)</code>")
              .arg(QString::fromStdString(sim::planDdpKwargs(plan)).toHtmlEscaped());
  m_planSummary->setText(text);
  m_openPlan->setEnabled(plan.listSupported);
  const std::vector<sim::PlannedBucket>& buckets =
      plan.listSupported ? plan.layout.buckets : std::vector<sim::PlannedBucket>{};
  m_planTable->setRowCount(static_cast<int>(buckets.size()));
  for (size_t k = 0; k < buckets.size(); ++k) {
    const sim::PlannedBucket& b = buckets[k];
    const bool simulated = k < plan.plannedAllreduces.size();
    const QString cells[] = {QStringLiteral("%1..%2").arg(b.first).arg(b.last),
                             QString::number(static_cast<double>(b.bytes) / sim::kPlanMiB, 'f', 3),
                             QString::number(b.capMib),
                             ms(b.readyNs),
                             ms(b.startNs),
                             ms(b.endNs),
                             simulated ? ms(plan.plannedAllreduces[k].startNs) : QString(),
                             simulated ? ms(plan.plannedAllreduces[k].endNs) : QString()};
    for (size_t c = 0; c < std::size(cells); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      m_planTable->setItem(static_cast<int>(k), static_cast<int>(c), item);
    }
  }
  QStringList rows;
  for (size_t k = 0; k < buckets.size(); ++k) rows << QString::number(k);
  m_planTable->setVerticalHeaderLabels(rows);
}

bool SweepPanel::selectPlan(int worldSize) {
  const int index = m_planWorldSize->findData(worldSize);
  if (index < 0) return false;
  m_planWorldSize->setCurrentIndex(index);
  showPlanDetails(static_cast<size_t>(index));
  return true;
}

int SweepPanel::shownPlanWorldSize() const {
  if (!m_plan || m_planWorldSize->currentIndex() < 0) return 0;
  return m_planWorldSize->currentData().toInt();
}

std::optional<WhatIfSettings> SweepPanel::shownPlanSettings() const {
  const int index = m_planWorldSize->currentIndex();
  if (!m_plan || index < 0 || static_cast<size_t>(index) >= m_plan->plans.size()) {
    return std::nullopt;
  }
  const sim::PlanResult& plan = m_plan->plans[static_cast<size_t>(index)];
  if (!plan.listSupported) return std::nullopt;
  return plannedSettings(m_planBase, m_plan->sweep.worldSizes[static_cast<size_t>(index)], plan);
}

}  // namespace ddpscope::gui
