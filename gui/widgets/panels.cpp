#include "gui/widgets/panels.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHeaderView>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "gui/model/category_style.h"
#include "gui/model/time_scale.h"
#include "gui/widgets/time_axis.h"
#include "gui/widgets/timeline_view.h"

namespace ddpscope::gui {

namespace {

QTableView* makeTable(QAbstractItemModel* model, QWidget* parent) {
  auto* table = new QTableView(parent);
  table->setModel(model);
  table->setAlternatingRowColors(true);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->verticalHeader()->setVisible(false);
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  table->horizontalHeader()->setStretchLastSection(true);
  return table;
}

// Shows `chart` in `view` and deletes the chart it replaces: QChartView::setChart takes the new
// chart and releases the old one without deleting it (Qt's documentation; LeakSanitizer found
// one chart leaked per setDocument).
void replaceChart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);
  delete old;
}

}  // namespace

// ---- OverlapPanel ----

OverlapPanel::OverlapPanel(QWidget* parent)
    : QWidget(parent),
      m_model(new OverlapModel(this)),
      m_chartView(new QChartView(this)),
      m_summary(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  m_summary->setWordWrap(true);
  layout->addWidget(m_summary);
  auto* split = new QSplitter(Qt::Vertical, this);
  m_table = makeTable(m_model, split);
  split->addWidget(m_table);
  m_chartView->setRenderHint(QPainter::Antialiasing);
  m_chartView->setMinimumHeight(180);
  split->addWidget(m_chartView);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split);
  setDocument(nullptr);
}

void OverlapPanel::setDocument(TraceDocumentPtr document) {
  m_model->setDocument(document);
  m_table->resizeColumnsToContents();
  auto* chart = new QChart();
  chart->setTitle(
      tr("Per rank, whole trace: compute only · overlapped (hidden comm) · exposed comm"));
  chart->legend()->setAlignment(Qt::AlignBottom);
  if (!document) {
    m_summary->setText(tr("No trace loaded."));
    replaceChart(m_chartView, chart);
    return;
  }
  auto* computeOnly = new QBarSet(tr("compute only"));
  auto* overlapped = new QBarSet(tr("overlapped (hidden comm)"));
  auto* exposed = new QBarSet(tr("exposed comm"));
  computeOnly->setColor(categoryColor(traces::Category::kBackward));
  overlapped->setColor(categoryColor(traces::Category::kAllreduce));
  exposed->setColor(exposedCommColor());
  QStringList categories;
  double maxTotal = 0;
  const auto& overlap = document->overlap();
  // Ranks top to bottom: Qt draws the first category at the bottom, so feed them reversed.
  for (auto it = overlap.rbegin(); it != overlap.rend(); ++it) {
    const traces::OverlapStats& s = it->total;
    *computeOnly << (s.compute - s.overlapped).toMillis();
    *overlapped << s.overlapped.toMillis();
    *exposed << s.exposedComm.toMillis();
    categories << tr("rank %1").arg(it->rank);
    maxTotal = std::max(maxTotal, (s.compute + s.exposedComm).toMillis());
  }
  auto* series = new QHorizontalStackedBarSeries();
  series->append(computeOnly);
  series->append(overlapped);
  series->append(exposed);
  chart->addSeries(series);
  auto* axisY = new QBarCategoryAxis();
  axisY->append(categories);
  chart->addAxis(axisY, Qt::AlignLeft);
  series->attachAxis(axisY);
  auto* axisX = new QValueAxis();
  axisX->setTitleText(tr("ms"));
  axisX->setRange(0, maxTotal > 0 ? maxTotal * 1.05 : 1);
  chart->addAxis(axisX, Qt::AlignBottom);
  series->attachAxis(axisX);
  replaceChart(m_chartView, chart);

  // Headline: the HTA number per rank (min / max when several ranks).
  double lo = 100, hi = 0;
  Nanos exposedMax;
  bool any = false;
  for (const auto& r : overlap) {
    if (!r.total.hasCommunication) continue;
    any = true;
    lo = std::min(lo, r.total.overlapPercent);
    hi = std::max(hi, r.total.overlapPercent);
    exposedMax = maxNanos(exposedMax, r.total.exposedComm);
  }
  if (!any) {
    m_summary->setText(tr("%1: no communication in this trace.")
                           .arg(QString::fromStdString(document->sourceName())));
  } else {
    m_summary->setText(
        tr("<b>%1</b> — overlap (HTA: |compute ∩ comm| / |comm|): <b>%2 %</b>%3; largest exposed "
           "communication on a rank: <b>%4</b>.")
            .arg(QString::fromStdString(document->sourceName()).toHtmlEscaped())
            .arg(lo, 0, 'f', 2)
            .arg(overlap.size() > 1 ? tr(" to <b>%1 %</b> across ranks").arg(hi, 0, 'f', 2)
                                    : QString())
            .arg(QString::fromStdString(formatDuration(exposedMax))));
  }
  // The run's DDP settings, as the trace records them (the same reader as replay's).
  if (const auto& settings = document->ddpSettings()) {
    m_summary->setText(
        m_summary->text() +
        tr("<br>DDP: %1").arg(QString::fromStdString(settings->toString()).toHtmlEscaped()));
  } else if (!document->ddpSettingsError().empty()) {
    m_summary->setText(
        m_summary->text() +
        tr("<br>DDP settings not shown: %1")
            .arg(QString::fromStdString(document->ddpSettingsError()).toHtmlEscaped()));
  }
}

// ---- ComparePanel ----

ComparePanel::ComparePanel(QWidget* parent)
    : QWidget(parent),
      m_zoom(new ZoomStack(this)),
      m_model(new CompareModel(this)),
      m_summary(new QLabel(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->setSpacing(2);
  m_summary->setWordWrap(true);
  layout->addWidget(m_summary);
  m_axis = new TimeAxis(m_zoom, this);
  m_axis->setCaption(tr("from iteration start"));
  layout->addWidget(m_axis);
  auto* split = new QSplitter(Qt::Vertical, this);
  m_split = split;
  m_viewA = new TimelineView(m_zoom, split);
  m_viewB = new TimelineView(m_zoom, split);
  m_table = makeTable(m_model, split);
  split->addWidget(m_viewA);
  split->addWidget(m_viewB);
  split->addWidget(m_table);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 2);
  layout->addWidget(split, 1);
  connect(m_viewA, &TimelineView::spanSelected, this,
          [this](SpanRef ref) { emit spanSelected(m_a, ref); });
  connect(m_viewB, &TimelineView::spanSelected, this,
          [this](SpanRef ref) { emit spanSelected(m_b, ref); });
  setRuns(nullptr, nullptr, {}, {});
}

void ComparePanel::setRuns(TraceDocumentPtr a, TraceDocumentPtr b, const QString& labelA,
                           const QString& labelB) {
  m_a = std::move(a);
  m_b = std::move(b);
  if (!m_a || !m_b) {
    m_model->setComparison({});
    m_viewA->setDocument(m_a, m_a ? m_a->startTime() : Nanos(0));
    m_viewB->setDocument(nullptr, Nanos(0));
    m_viewA->setTitle(m_a ? tr("A: %1").arg(labelA) : QString());
    m_viewB->setTitle(QString());
    m_summary->setText(
        tr("Compare two runs: open run A (File ▸ Open) and run B (File ▸ Open run B "
           "for comparison), drop two files, or pin a what-if result."));
    if (m_a) m_zoom->setFullRange(Nanos(0), m_a->endTime() - m_a->startTime());
    return;
  }
  traces::RunComparison cmp = traces::compareRuns(m_a->timeline(), m_b->timeline());
  Nanos alignA = cmp.iterations.empty() ? m_a->startTime() : cmp.alignA;
  Nanos alignB = cmp.iterations.empty() ? m_b->startTime() : cmp.alignB;
  m_viewA->setDocument(m_a, alignA);
  m_viewB->setDocument(m_b, alignB);
  m_viewA->setTitle(tr("A: %1").arg(labelA));
  m_viewB->setTitle(tr("B: %1").arg(labelB));
  Nanos start = minNanos(m_a->startTime() - alignA, m_b->startTime() - alignB);
  Nanos end = maxNanos(m_a->endTime() - alignA, m_b->endTime() - alignB);
  m_zoom->setFullRange(start, end);
  traces::Delta step = cmp.meanDelta(traces::ComparedMetric::kStepTime);
  traces::Delta exposed = cmp.meanDelta(traces::ComparedMetric::kExposedComm);
  auto pct = [](const traces::Delta& d) {
    return d.deltaPercent ? QStringLiteral(" (%1%2 %)")
                                .arg(*d.deltaPercent > 0 ? "+" : "")
                                .arg(*d.deltaPercent, 0, 'f', 1)
                          : QString();
  };
  m_summary->setText(
      tr("Matched %1 (rank, iteration) pairs and %2 buckets by key; %3 only in A, %4 only in B. "
         "Mean step time: A %5 ms → B %6 ms%7; exposed comm: A %8 ms → B %9 ms%10. Both runs "
         "start at their first matched iteration.")
          .arg(cmp.iterations.size())
          .arg(cmp.buckets.size())
          .arg(cmp.iterationsOnlyInA.size())
          .arg(cmp.iterationsOnlyInB.size())
          .arg(step.a, 0, 'f', 3)
          .arg(step.b, 0, 'f', 3)
          .arg(pct(step))
          .arg(exposed.a, 0, 'f', 3)
          .arg(exposed.b, 0, 'f', 3)
          .arg(pct(exposed)));
  m_model->setComparison(std::move(cmp));
  m_table->resizeColumnsToContents();
  fitSplit();
}

void ComparePanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  fitSplit();
}

void ComparePanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitSplit();
}

void ComparePanel::fitSplit() {
  int total = m_split->height();
  if (total < 100) return;
  int a = std::min(m_viewA->contentHeight() + 8, total * 2 / 5);
  int b = std::min(m_viewB->contentHeight() + 8, total * 2 / 5);
  m_split->setSizes({a, b, std::max(80, total - a - b)});
}

}  // namespace ddpscope::gui
