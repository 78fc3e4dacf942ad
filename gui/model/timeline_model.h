// Item models over a TraceDocument (Qt's model/view split: models own no painting).
//
// TimelineModel: a tree, ranks at the top, their lanes (in the document's row order) below.
//   Columns: name, kind, spans, busy (|∪ spans| of device lanes, formatted). Roles:
//   RowRole (the document row of a lane; -1 for a rank), RankIdRole, SpanCountRole (qint64).
// SearchModel: spans whose name contains a text (case-insensitive), in row then start order,
//   at most kMaxResults. Columns: name, rank, lane, start, duration. SpanRefRole → (row, span)
//   packed as QPoint(row, span).
#pragma once

#include <QAbstractItemModel>
#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "gui/model/trace_document.h"

namespace ddpscope::gui {

enum ModelRole {
  kRowRole = Qt::UserRole + 1,
  kRankIdRole,
  kSpanCountRole,
  kSpanRefRole,
  kRawValueRole,  // the number behind a formatted cell (double / qint64)
};

class TimelineModel : public QAbstractItemModel {
  Q_OBJECT
 public:
  enum Column { kNameColumn, kKindColumn, kSpansColumn, kColumnCount };

  explicit TimelineModel(QObject* parent = nullptr);
  void setDocument(TraceDocumentPtr document);
  const TraceDocumentPtr& document() const { return m_document; }

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  // internalId: 0 for a rank item, rankIndex + 1 for a lane item of that rank.
  TraceDocumentPtr m_document;
  std::vector<std::vector<int>> m_rankRows;  // [rankIndex] → document rows
};

class SearchModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int kMaxResults = 10000;
  enum Column {
    kNameColumn,
    kRankColumn,
    kLaneColumn,
    kStartColumn,
    kDurationColumn,
    kColumnCount
  };

  explicit SearchModel(QObject* parent = nullptr);
  void setDocument(TraceDocumentPtr document);
  void setQuery(const QString& text);
  const QString& query() const { return m_query; }
  const std::vector<SpanRef>& results() const { return m_results; }
  bool truncated() const { return m_truncated; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  void rebuild();
  TraceDocumentPtr m_document;
  QString m_query;
  std::vector<SpanRef> m_results;
  bool m_truncated = false;
};

}  // namespace ddpscope::gui
