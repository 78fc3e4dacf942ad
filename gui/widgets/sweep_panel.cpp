#include "gui/widgets/sweep_panel.h"

#include <QChart>
#include <QChartView>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QLabel>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPushButton>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>

namespace ddpscope::gui {

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
  m_status = new QLabel(tr("Bucket caps 1, 2, 5, 10, 25, 50, 100, 200 MiB; model, cluster and "
                           "flags from the What-if tab. Click a point to open its timeline."),
                        this);
  bar->addWidget(m_status, 1);
  layout->addLayout(bar);
  m_chartView = new QChartView(this);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  layout->addWidget(m_chartView, 1);
  connect(m_run, &QPushButton::clicked, this, &SweepPanel::runSweep);
}

void SweepPanel::setWorldSizes(const QString& commaList) {
  m_worldSizes->setText(commaList);
}

void SweepPanel::runSweep() {
  std::vector<int> worldSizes;
  for (const QString& part : m_worldSizes->text().split(',', Qt::SkipEmptyParts)) {
    bool ok = false;
    int w = part.trimmed().toInt(&ok);
    if (ok && w > 0) worldSizes.push_back(w);
  }
  if (worldSizes.empty()) {
    m_status->setText(tr("Enter world sizes, e.g. 8,16,32,64"));
    return;
  }
  std::vector<double> caps(std::begin(kTypicalBucketCapsMb), std::end(kTypicalBucketCapsMb));
  m_run->setEnabled(false);
  m_status->setText(tr("sweeping %1 configurations…").arg(caps.size() * worldSizes.size()));
  using Result = std::shared_ptr<StatusOr<SweepResult>>;
  auto* watcher = new QFutureWatcher<Result>(this);
  connect(watcher, &QFutureWatcher<Result>::finished, this, [this, watcher]() {
    Result result = watcher->result();
    watcher->deleteLater();
    m_run->setEnabled(true);
    if (!result->isOk()) {
      m_status->setText(
          tr("<span style='color:#c62828'>%1</span>")
              .arg(QString::fromStdString(result->status().message()).toHtmlEscaped()));
    } else {
      showResult(**result);
    }
    emit sweepFinished();
  });
  WhatIfSettings base = m_base;
  watcher->setFuture(QtConcurrent::run([base, caps, worldSizes]() {
    return std::make_shared<StatusOr<SweepResult>>(gui::runSweep(base, caps, worldSizes));
  }));
}

void SweepPanel::showResult(const SweepResult& result) {
  m_result = result;
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
  const QColor palette[] = {QColor(0x1F, 0x77, 0xB4), QColor(0xFF, 0x7F, 0x0E),
                            QColor(0x2C, 0xA0, 0x2C), QColor(0xD6, 0x27, 0x28),
                            QColor(0x94, 0x67, 0xBD), QColor(0x8C, 0x56, 0x4B),
                            QColor(0xE3, 0x77, 0xC2), QColor(0x7F, 0x7F, 0x7F)};
  auto* best = new QScatterSeries();
  best->setName(tr("best cap"));
  best->setMarkerShape(QScatterSeries::MarkerShapeStar);
  best->setMarkerSize(18);
  best->setColor(QColor(0xE5, 0x39, 0x35));
  best->setBorderColor(QColor(0x80, 0x10, 0x10));
  for (size_t w = 0; w < result.worldSizes.size(); ++w) {
    int worldSize = result.worldSizes[w];
    QColor color = palette[w % std::size(palette)];
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

}  // namespace ddpscope::gui
