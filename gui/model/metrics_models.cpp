#include "gui/model/metrics_models.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <cmath>

#include "gui/model/time_scale.h"
#include "gui/model/timeline_model.h"

namespace ddpscope::gui {

using traces::ComparedMetric;
using traces::Delta;

namespace {

QString ms(Nanos t) {
  return QString::number(t.toMillis(), 'f', 3);
}

}  // namespace

// ---- OverlapModel ----

OverlapModel::OverlapModel(QObject* parent) : QAbstractTableModel(parent) {}

void OverlapModel::setDocument(TraceDocumentPtr document) {
  beginResetModel();
  m_document = std::move(document);
  m_rows.clear();
  if (m_document) {
    const auto& overlap = m_document->overlap();
    for (size_t r = 0; r < overlap.size(); ++r) {
      for (size_t i = 0; i < overlap[r].iterations.size(); ++i) {
        m_rows.push_back(Row{static_cast<int>(r), static_cast<int>(i)});
      }
      m_rows.push_back(Row{static_cast<int>(r), -1});
    }
  }
  endResetModel();
}

int OverlapModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int OverlapModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant OverlapModel::data(const QModelIndex& index, int role) const {
  if (!m_document || !checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const Row& row = m_rows[static_cast<size_t>(index.row())];
  const traces::RankOverlap& rank = m_document->overlap()[static_cast<size_t>(row.rankIndex)];
  const traces::IterationOverlap* it =
      row.iteration >= 0 ? &rank.iterations[static_cast<size_t>(row.iteration)] : nullptr;
  const traces::OverlapStats& s = it ? it->stats : rank.total;
  Nanos step = it ? it->stepTime : Nanos(0);
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kRankColumn:
        return rank.rank;
      case kIterationColumn:
        return it ? QString::number(it->index) : QStringLiteral("all");
      case kStepColumn:
        return it ? ms(step) : QString();
      case kComputeColumn:
        return ms(s.compute);
      case kCommColumn:
        return ms(s.comm);
      case kOverlappedColumn:
        return ms(s.overlapped);
      case kExposedColumn:
        return ms(s.exposedComm);
      case kPercentColumn:
        return QString::fromStdString(traces::formatPercent(s));
      case kLoggerColumn:
        return it && it->ddpLoggerOverlap ? ms(*it->ddpLoggerOverlap) : QString();
    }
  }
  if (role == kRawValueRole) {
    switch (index.column()) {
      case kRankColumn:
        return rank.rank;
      case kIterationColumn:
        return it ? static_cast<qint64>(it->index) : qint64(-1);
      case kStepColumn:
        return step.toMillis();
      case kComputeColumn:
        return s.compute.toMillis();
      case kCommColumn:
        return s.comm.toMillis();
      case kOverlappedColumn:
        return s.overlapped.toMillis();
      case kExposedColumn:
        return s.exposedComm.toMillis();
      case kPercentColumn:
        return s.overlapPercent;
      case kLoggerColumn:
        return it && it->ddpLoggerOverlap ? it->ddpLoggerOverlap->toMillis() : 0.0;
    }
  }
  if (role == Qt::TextAlignmentRole) {
    return index.column() <= kIterationColumn ? int(Qt::AlignCenter)
                                              : int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::FontRole && !it) {
    QFont font;
    font.setBold(true);
    return font;
  }
  if (role == Qt::ForegroundRole && index.column() == kExposedColumn && s.exposedComm > Nanos(0)) {
    return QBrush(QColor(0xC6, 0x28, 0x28));
  }
  return {};
}

QVariant OverlapModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::DisplayRole) {
    static const char* kNames[] = {"Rank",
                                   "Iteration",
                                   "Step (ms)",
                                   "Compute (ms)",
                                   "Comm (ms)",
                                   "Overlapped (ms)",
                                   "Exposed comm (ms)",
                                   "Overlap %",
                                   "DDP logger window (ms)"};
    return section >= 0 && section < kColumnCount ? QString::fromUtf8(kNames[section]) : QVariant();
  }
  if (role == Qt::ToolTipRole && section == kPercentColumn) {
    return QStringLiteral("HTA definition: |∪compute ∩ ∪comm| / |∪comm|");
  }
  return {};
}

// ---- CompareModel ----

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::setComparison(traces::RunComparison comparison) {
  beginResetModel();
  m_comparison = std::move(comparison);
  m_rows.clear();
  const traces::RunComparison& c = m_comparison;
  if (!c.iterations.empty()) {
    for (int m = 0; m < traces::kComparedMetricCount; ++m)
      m_rows.push_back({RowKind::kMean, -1, m});
  }
  for (size_t i = 0; i < c.iterations.size(); ++i) {
    for (int m = 0; m < traces::kComparedMetricCount; ++m) {
      m_rows.push_back({RowKind::kIteration, static_cast<int>(i), m});
    }
  }
  for (size_t i = 0; i < c.buckets.size(); ++i) {
    m_rows.push_back({RowKind::kBucket, static_cast<int>(i), -1});
  }
  for (size_t i = 0; i < c.iterationsOnlyInA.size() + c.bucketsOnlyInA.size(); ++i) {
    m_rows.push_back({RowKind::kOnlyInA, static_cast<int>(i), -1});
  }
  for (size_t i = 0; i < c.iterationsOnlyInB.size() + c.bucketsOnlyInB.size(); ++i) {
    m_rows.push_back({RowKind::kOnlyInB, static_cast<int>(i), -1});
  }
  endResetModel();
}

Delta CompareModel::rowDelta(int row) const {
  const Row& r = m_rows.at(static_cast<size_t>(row));
  switch (r.kind) {
    case RowKind::kMean:
      return m_comparison.meanDelta(static_cast<ComparedMetric>(r.metric));
    case RowKind::kIteration:
      return m_comparison.iterations[static_cast<size_t>(r.item)].delta(
          static_cast<ComparedMetric>(r.metric));
    case RowKind::kBucket:
      return m_comparison.buckets[static_cast<size_t>(r.item)].delta();
    default:
      return {};
  }
}

int CompareModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  const Row& r = m_rows[static_cast<size_t>(index.row())];
  const traces::RunComparison& c = m_comparison;
  bool hasDelta =
      r.kind == RowKind::kMean || r.kind == RowKind::kIteration || r.kind == RowKind::kBucket;
  bool percentMetric = r.metric == static_cast<int>(ComparedMetric::kOverlapPercent);
  if (role == Qt::DisplayRole) {
    if (index.column() == kKeyColumn) {
      switch (r.kind) {
        case RowKind::kMean:
          return QStringLiteral("mean of %1 matched iterations").arg(c.iterations.size());
        case RowKind::kIteration: {
          const auto& key = c.iterations[static_cast<size_t>(r.item)].key;
          return QStringLiteral("rank %1, iteration %2").arg(key.rank).arg(key.iteration);
        }
        case RowKind::kBucket: {
          const auto& key = c.buckets[static_cast<size_t>(r.item)].key;
          return QStringLiteral("rank %1, iteration %2, bucket %3")
              .arg(key.rank)
              .arg(key.iteration)
              .arg(key.bucket);
        }
        case RowKind::kOnlyInA:
        case RowKind::kOnlyInB: {
          bool inA = r.kind == RowKind::kOnlyInA;
          const auto& its = inA ? c.iterationsOnlyInA : c.iterationsOnlyInB;
          const auto& bks = inA ? c.bucketsOnlyInA : c.bucketsOnlyInB;
          size_t i = static_cast<size_t>(r.item);
          if (i < its.size()) {
            return QStringLiteral("rank %1, iteration %2").arg(its[i].rank).arg(its[i].iteration);
          }
          const auto& b = bks[i - its.size()];
          return QStringLiteral("rank %1, iteration %2, bucket %3")
              .arg(b.rank)
              .arg(b.iteration)
              .arg(b.bucket);
        }
      }
    }
    if (index.column() == kMetricColumn) {
      switch (r.kind) {
        case RowKind::kMean:
        case RowKind::kIteration:
          return QString::fromUtf8(
              traces::comparedMetricName(static_cast<ComparedMetric>(r.metric)));
        case RowKind::kBucket:
          return QStringLiteral("allreduce");
        case RowKind::kOnlyInA:
          return QStringLiteral("only in A");
        case RowKind::kOnlyInB:
          return QStringLiteral("only in B");
      }
    }
    if (!hasDelta) return {};
    Delta d = rowDelta(index.row());
    QString unit = percentMetric ? QStringLiteral(" %") : QStringLiteral(" ms");
    switch (index.column()) {
      case kAColumn:
        return QString::number(d.a, 'f', 3) + unit;
      case kBColumn:
        return QString::number(d.b, 'f', 3) + unit;
      case kDeltaColumn:
        return (d.delta > 0 ? QStringLiteral("+") : QString()) + QString::number(d.delta, 'f', 3) +
               unit;
      case kPercentColumn:
        return d.deltaPercent ? (*d.deltaPercent > 0 ? QStringLiteral("+") : QString()) +
                                    QString::number(*d.deltaPercent, 'f', 1) + QStringLiteral(" %")
                              : QStringLiteral("—");
    }
  }
  if (role == kRawValueRole && hasDelta) {
    Delta d = rowDelta(index.row());
    switch (index.column()) {
      case kAColumn:
        return d.a;
      case kBColumn:
        return d.b;
      case kDeltaColumn:
        return d.delta;
      case kPercentColumn:
        return d.deltaPercent ? QVariant(*d.deltaPercent) : QVariant();
    }
  }
  if (role == Qt::ForegroundRole && hasDelta &&
      (index.column() == kDeltaColumn || index.column() == kPercentColumn)) {
    Delta d = rowDelta(index.row());
    if (std::fabs(d.delta) < 1e-9) return {};
    // Lower is better for times, higher for overlap %.
    bool better = percentMetric ? d.delta > 0 : d.delta < 0;
    return QBrush(better ? QColor(0x2E, 0x7D, 0x32) : QColor(0xC6, 0x28, 0x28));
  }
  if (role == Qt::TextAlignmentRole && index.column() >= kAColumn) {
    return int(Qt::AlignRight | Qt::AlignVCenter);
  }
  if (role == Qt::FontRole && r.kind == RowKind::kMean) {
    QFont font;
    font.setBold(true);
    return font;
  }
  return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Key", "Metric", "A", "B", "Δ (B − A)", "Δ %"};
  return section >= 0 && section < kColumnCount ? QString::fromUtf8(kNames[section]) : QVariant();
}

}  // namespace ddpscope::gui
