// Table models of metrics computed by traces/ (the GUI only formats them).
//
// OverlapModel: per rank, one row per iteration plus an "all" row (the whole-trace HTA number)
//   from traces::computeOverlap. Columns: rank, iteration, step, compute, comm, overlapped,
//   exposed comm, overlap %, DDP logger window. kRawValueRole gives the number (ms or %).
// CompareModel: a traces::RunComparison as rows: first the mean of each metric over the matched
//   iterations, then each matched (rank, iteration) × metric, then each matched
//   (rank, iteration, bucket) allreduce duration, then unmatched keys. Columns: key, metric,
//   A, B, Δ (B − A), Δ %. kRawValueRole on A/B/Δ/Δ% gives the doubles RunComparison computed.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "gui/model/timeline_model.h"  // ModelRole
#include "gui/model/trace_document.h"
#include "traces/run_comparison.h"

namespace ddpscope::gui {

class OverlapModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kRankColumn,
    kIterationColumn,
    kStepColumn,
    kComputeColumn,
    kCommColumn,
    kOverlappedColumn,
    kExposedColumn,
    kPercentColumn,
    kLoggerColumn,
    kColumnCount
  };

  explicit OverlapModel(QObject* parent = nullptr);
  void setDocument(TraceDocumentPtr document);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    int rankIndex;
    int iteration;  // index into RankOverlap::iterations; -1 = whole trace
  };
  TraceDocumentPtr m_document;
  std::vector<Row> m_rows;
};

class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kKeyColumn,
    kMetricColumn,
    kAColumn,
    kBColumn,
    kDeltaColumn,
    kPercentColumn,
    kColumnCount
  };
  enum class RowKind { kMean, kIteration, kBucket, kOnlyInA, kOnlyInB };

  explicit CompareModel(QObject* parent = nullptr);
  void setComparison(traces::RunComparison comparison);
  const traces::RunComparison& comparison() const { return m_comparison; }

  struct Row {
    RowKind kind;
    int item;    // index into iterations / buckets / the unmatched list
    int metric;  // ComparedMetric for kMean and kIteration
  };
  const std::vector<Row>& rowsInfo() const { return m_rows; }
  // The delta behind a kMean, kIteration or kBucket row.
  traces::Delta rowDelta(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  traces::RunComparison m_comparison;
  std::vector<Row> m_rows;
};

}  // namespace ddpscope::gui
