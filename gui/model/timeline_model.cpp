#include "gui/model/timeline_model.h"

#include <QPoint>
#include <algorithm>

#include "gui/model/time_scale.h"

namespace ddpscope::gui {

// ---- TimelineModel ----

TimelineModel::TimelineModel(QObject* parent) : QAbstractItemModel(parent) {}

void TimelineModel::setDocument(TraceDocumentPtr document) {
  beginResetModel();
  m_document = std::move(document);
  m_rankRows.clear();
  if (m_document) {
    m_rankRows.resize(static_cast<size_t>(m_document->timeline().rankCount()));
    for (int row = 0; row < m_document->rowCount(); ++row) {
      m_rankRows[static_cast<size_t>(m_document->rows()[static_cast<size_t>(row)].rankIndex)]
          .push_back(row);
    }
  }
  endResetModel();
}

QModelIndex TimelineModel::index(int row, int column, const QModelIndex& parent) const {
  if (!hasIndex(row, column, parent)) return {};
  if (!parent.isValid()) return createIndex(row, column, quintptr(0));
  if (parent.internalId() != 0) return {};
  return createIndex(row, column, quintptr(parent.row() + 1));
}

QModelIndex TimelineModel::parent(const QModelIndex& child) const {
  if (!child.isValid() || child.internalId() == 0) return {};
  return createIndex(static_cast<int>(child.internalId() - 1), 0, quintptr(0));
}

int TimelineModel::rowCount(const QModelIndex& parent) const {
  if (!m_document) return 0;
  if (!parent.isValid()) return static_cast<int>(m_rankRows.size());
  if (parent.internalId() != 0 || parent.column() != 0) return 0;
  return static_cast<int>(m_rankRows[static_cast<size_t>(parent.row())].size());
}

int TimelineModel::columnCount(const QModelIndex&) const {
  return kColumnCount;
}

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!m_document || !checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  if (index.internalId() == 0) {
    const traces::RankTrack& track = m_document->timeline().rank(index.row());
    qint64 spans = 0;
    for (const auto& lane : track.lanes) spans += static_cast<qint64>(lane.spans.size());
    if (role == Qt::DisplayRole) {
      switch (index.column()) {
        case kNameColumn:
          return track.name.empty() ? QStringLiteral("rank %1").arg(track.rank)
                                    : QString::fromStdString(track.name);
        case kKindColumn:
          return QStringLiteral("rank");
        case kSpansColumn:
          return spans;
      }
    }
    if (role == kRowRole) return -1;
    if (role == kRankIdRole) return track.rank;
    if (role == kSpanCountRole) return spans;
    return {};
  }
  int rankIndex = static_cast<int>(index.internalId() - 1);
  int docRow = m_rankRows[static_cast<size_t>(rankIndex)][static_cast<size_t>(index.row())];
  const LaneRow& row = m_document->rows()[static_cast<size_t>(docRow)];
  qint64 spans = static_cast<qint64>(m_document->lane(docRow).spans.size());
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kNameColumn:
        return QString::fromStdString(row.label);
      case kKindColumn:
        return QString::fromUtf8(traces::laneKindName(row.kind));
      case kSpansColumn:
        return spans;
    }
  }
  if (role == kRowRole) return docRow;
  if (role == kRankIdRole) return row.rankId;
  if (role == kSpanCountRole) return spans;
  return {};
}

QVariant TimelineModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kNameColumn:
      return QStringLiteral("Rank / lane");
    case kKindColumn:
      return QStringLiteral("Kind");
    case kSpansColumn:
      return QStringLiteral("Spans");
  }
  return {};
}

// ---- SearchModel ----

SearchModel::SearchModel(QObject* parent) : QAbstractTableModel(parent) {}

void SearchModel::setDocument(TraceDocumentPtr document) {
  m_document = std::move(document);
  rebuild();
}

void SearchModel::setQuery(const QString& text) {
  m_query = text;
  rebuild();
}

void SearchModel::rebuild() {
  beginResetModel();
  m_results.clear();
  m_truncated = false;
  if (m_document && !m_query.isEmpty()) {
    std::string needle = m_query.toLower().toStdString();
    auto lower = [](std::string s) {
      std::transform(s.begin(), s.end(), s.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      return s;
    };
    for (int row = 0; row < m_document->rowCount() && !m_truncated; ++row) {
      const auto& spans = m_document->lane(row).spans;
      for (size_t i = 0; i < spans.size(); ++i) {
        if (lower(spans[i].name).find(needle) == std::string::npos) continue;
        if (static_cast<int>(m_results.size()) >= kMaxResults) {
          m_truncated = true;
          break;
        }
        m_results.push_back(SpanRef{row, static_cast<int32_t>(i)});
      }
    }
  }
  endResetModel();
}

int SearchModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_results.size());
}

int SearchModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant SearchModel::data(const QModelIndex& index, int role) const {
  if (!m_document || !checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
  SpanRef ref = m_results[static_cast<size_t>(index.row())];
  const traces::Span& span = m_document->span(ref);
  const LaneRow& row = m_document->rows()[static_cast<size_t>(ref.row)];
  if (role == kSpanRefRole) return QPoint(ref.row, ref.span);
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kNameColumn:
        return QString::fromStdString(span.name);
      case kRankColumn:
        return row.rankId;
      case kLaneColumn:
        return QString::fromStdString(row.label);
      case kStartColumn:
        return QString::fromStdString(formatDuration(span.start));
      case kDurationColumn:
        return QString::fromStdString(formatDuration(span.duration));
    }
  }
  if (role == kRawValueRole) {
    if (index.column() == kStartColumn) return static_cast<qint64>(span.start.count());
    if (index.column() == kDurationColumn) return static_cast<qint64>(span.duration.count());
  }
  return {};
}

QVariant SearchModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"Name", "Rank", "Lane", "Start", "Duration"};
  return section >= 0 && section < kColumnCount ? QString::fromUtf8(kNames[section]) : QVariant();
}

}  // namespace ddpscope::gui
