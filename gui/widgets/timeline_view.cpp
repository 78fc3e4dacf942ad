#include "gui/widgets/timeline_view.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <array>
#include <cmath>

#include "gui/model/category_style.h"

namespace ddpscope::gui {

using traces::Category;
using traces::LaneKind;
using traces::Span;

TimeScale viewTimeScale(const ZoomStack::Range& range, int widthPx) {
  TimeScale scale;
  scale.start = range.start;
  scale.end = range.end;
  scale.x0 = kLabelColumnPx;
  scale.widthPx = std::max(1, widthPx - kLabelColumnPx - kRightMarginPx);
  return scale;
}

namespace {

QColor textColorOn(const QColor& background) {
  int luminance =
      (299 * background.red() + 587 * background.green() + 114 * background.blue()) / 1000;
  return luminance < 150 ? Qt::white : Qt::black;
}

// Fill and fold colours per category, computed once (darker() is not free).
struct CategoryPalette {
  std::array<QColor, traces::kCategoryCount> fill;
  std::array<QColor, traces::kCategoryCount> fold;
};

const CategoryPalette& categoryPalette() {
  static const CategoryPalette palette = [] {
    CategoryPalette out;
    for (int c = 0; c < traces::kCategoryCount; ++c) {
      out.fill[static_cast<size_t>(c)] = categoryColor(static_cast<Category>(c));
      out.fold[static_cast<size_t>(c)] = out.fill[static_cast<size_t>(c)].darker(115);
    }
    return out;
  }();
  return palette;
}

std::string toLower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

TimelineView::TimelineView(ZoomStack* zoom, QWidget* parent)
    : QWidget(parent), m_zoom(zoom), m_vbar(new QScrollBar(Qt::Vertical, this)) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumHeight(80);
  connect(m_zoom, &ZoomStack::rangeChanged, this, qOverload<>(&QWidget::update));
  connect(m_vbar, &QScrollBar::valueChanged, this, qOverload<>(&QWidget::update));
  relayout();
}

void TimelineView::setDocument(TraceDocumentPtr document, Nanos offset) {
  m_document = std::move(document);
  m_offset = offset;
  m_selected = {};
  m_hovered = {};
  relayout();
  m_vbar->setValue(0);
  update();
}

void TimelineView::setTitle(const QString& title) {
  m_title = title;
  relayout();
  update();
}

void TimelineView::setHighlight(const QString& text) {
  m_highlight = toLower(text.toStdString());
  update();
}

void TimelineView::selectSpan(SpanRef ref) {
  m_selected = ref;
  update();
  emit spanSelected(ref);
}

int TimelineView::shownLevels(int row) const {
  return std::clamp(m_document->levelCount(row), 1, kMaxShownLevels);
}

int TimelineView::rowHeight(int row) const {
  return shownLevels(row) * kLevelHeightPx + 4;
}

void TimelineView::relayout() {
  m_rowTop.clear();
  int y = m_title.isEmpty() ? 0 : 20;
  if (m_document) {
    for (int row = 0; row < m_document->rowCount(); ++row) {
      if (m_document->rows()[static_cast<size_t>(row)].firstOfRank) y += kRankHeaderPx;
      m_rowTop.push_back(y);
      y += rowHeight(row);
    }
  }
  m_contentHeight = y + 4;
  m_vbar->setGeometry(width() - kRightMarginPx, 0, kRightMarginPx, height());
  m_vbar->setRange(0, std::max(0, m_contentHeight - height()));
  m_vbar->setPageStep(height());
  m_vbar->setSingleStep(kLevelHeightPx);
  m_vbar->setVisible(m_contentHeight > height());
}

void TimelineView::resizeEvent(QResizeEvent*) {
  relayout();
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  m_paintedSpans = 0;
  m_paintedFolds = 0;
  if (!m_document) {
    p.setPen(QColor(0x60, 0x60, 0x60));
    p.drawText(rect(), Qt::AlignCenter,
               tr("Open a trace: File ▸ Open, drag and drop a file here, or pass paths on the "
                  "command line.\nddpscope simulate --trace, ddpscope-run and PyTorch profiler "
                  "(Kineto) traces are accepted."));
    return;
  }
  const TimeScale scale = timeScale();
  const int scroll = m_vbar->value();
  const int plotLeft = kLabelColumnPx;
  const int plotRight = width() - kRightMarginPx;
  const auto& rows = m_document->rows();

  // Iteration boundaries of the first rank that has any, as faint vertical lines.
  p.setClipRect(plotLeft, 0, plotRight - plotLeft, height());
  for (int r = 0; r < m_document->timeline().rankCount(); ++r) {
    const auto& its = m_document->iterations(r);
    if (its.empty()) continue;
    p.setPen(QPen(QColor(0xB0, 0xB0, 0xC8), 1, Qt::DashLine));
    for (const auto& it : its) {
      double x = scale.toPixel(toDisplay(it.start));
      if (x >= plotLeft && x <= plotRight) p.drawLine(QPointF(x, 0), QPointF(x, height()));
    }
    break;
  }

  for (int row = 0; row < m_document->rowCount(); ++row) {
    int y = m_rowTop[static_cast<size_t>(row)] - scroll;
    int h = rowHeight(row);
    if (rows[static_cast<size_t>(row)].firstOfRank) {
      int hy = y - kRankHeaderPx;
      if (hy < height() && hy + kRankHeaderPx > 0) {
        p.fillRect(QRect(plotLeft, hy, plotRight - plotLeft, kRankHeaderPx - 2),
                   QColor(0xEC, 0xEE, 0xF4));
      }
    }
    if (y + h < 0 || y > height()) continue;
    paintRow(p, row, y, scale);
  }
  p.setClipping(false);

  // Label column.
  p.fillRect(QRect(0, 0, plotLeft, height()), QColor(0xF6, 0xF6, 0xF8));
  p.setPen(QColor(0xD0, 0xD0, 0xD8));
  p.drawLine(plotLeft - 1, 0, plotLeft - 1, height());
  QFont base = font();
  QFont bold = base;
  bold.setBold(true);
  QFont small = base;
  small.setPointSizeF(std::max(6.0, base.pointSizeF() - 1));
  if (!m_title.isEmpty()) {
    p.fillRect(QRect(0, -scroll, width(), 20), QColor(0x37, 0x47, 0x4F));
    p.setPen(Qt::white);
    p.setFont(bold);
    p.drawText(QRect(6, -scroll, width() - 12, 20), Qt::AlignVCenter | Qt::AlignLeft, m_title);
  }
  for (int row = 0; row < m_document->rowCount(); ++row) {
    const LaneRow& info = rows[static_cast<size_t>(row)];
    int y = m_rowTop[static_cast<size_t>(row)] - scroll;
    int h = rowHeight(row);
    if (info.firstOfRank) {
      int hy = y - kRankHeaderPx;
      const auto& track = m_document->timeline().rank(info.rankIndex);
      QString name =
          track.name.empty() ? tr("rank %1").arg(info.rankId) : QString::fromStdString(track.name);
      const auto& ov = m_document->overlap()[static_cast<size_t>(info.rankIndex)].total;
      p.setFont(bold);
      p.setPen(QColor(0x20, 0x20, 0x30));
      p.drawText(QRect(6, hy, plotLeft - 8, kRankHeaderPx), Qt::AlignVCenter | Qt::AlignLeft, name);
      if (ov.hasCommunication) {
        p.setFont(small);
        p.setPen(QColor(0x50, 0x50, 0x60));
        p.drawText(QRect(6, hy, plotLeft - 10, kRankHeaderPx), Qt::AlignVCenter | Qt::AlignRight,
                   tr("overlap %1 %").arg(QString::fromStdString(traces::formatPercent(ov))));
      }
    }
    if (y + h < 0 || y > height()) continue;
    p.setFont(base);
    p.setPen(QColor(0x30, 0x30, 0x30));
    QString label = QFontMetrics(base).elidedText(QString::fromStdString(info.label),
                                                  Qt::ElideMiddle, plotLeft - 22);
    p.drawText(QRect(16, y, plotLeft - 20, std::min(h, kLevelHeightPx + 4)),
               Qt::AlignVCenter | Qt::AlignLeft, label);
    if (info.kind == LaneKind::kComm) {
      p.fillRect(QRect(6, y + 5, 5, 9), categoryColor(Category::kAllreduce));
    } else if (info.kind == LaneKind::kCompute) {
      p.fillRect(QRect(6, y + 5, 5, 9), categoryColor(Category::kBackward));
    }
  }
}

void TimelineView::paintRow(QPainter& p, int row, int y, const TimeScale& scale) {
  const LaneRow& info = m_document->rows()[static_cast<size_t>(row)];
  const int h = rowHeight(row);
  const double left = kLabelColumnPx;
  const double right = width() - kRightMarginPx;
  const Nanos t0 = toTrace(scale.start);
  const Nanos t1 = toTrace(scale.end);
  if (row % 2) p.fillRect(QRectF(left, y, right - left, h), QColor(0xFA, 0xFA, 0xFC));

  // Exposed communication: shaded over the lane, solid strip along its bottom.
  if (info.kind == LaneKind::kComm) {
    const auto& exposed = m_document->exposedComm(info.rankIndex);
    auto it = std::upper_bound(exposed.begin(), exposed.end(), t0,
                               [](Nanos t, const traces::Interval& i) { return t < i.end; });
    QColor shade = exposedCommColor();
    shade.setAlpha(40);
    while (it != exposed.end() && it->start < t1) {
      double x0 = std::max(left - 1, scale.toPixel(toDisplay(it->start)));
      double x1 = std::min(right + 1, scale.toPixel(toDisplay(it->end)));
      x1 = std::max(x1, x0 + 1);
      p.fillRect(QRectF(x0, y, x1 - x0, h), shade);
      p.fillRect(QRectF(x0, y + h - 4, x1 - x0, 4), exposedCommColor());
      // Skip intervals inside the pixel just drawn.
      Nanos next = toTrace(scale.toTime(std::floor(x1) + 1));
      auto jump = std::upper_bound(it + 1, exposed.end(), next,
                                   [](Nanos t, const traces::Interval& i) { return t < i.end; });
      it = jump;
    }
  }

  const auto& spans = m_document->lane(row).spans;
  const QFontMetrics metrics(font());
  const CategoryPalette& palette = categoryPalette();
  const int levels = shownLevels(row);
  for (int level = 0; level < levels; ++level) {
    const auto& ids = m_document->levels(row)[static_cast<size_t>(level)].spans;
    const double yl = y + 2 + level * kLevelHeightPx;
    const double hl = kLevelHeightPx - 2;
    auto [first, last] = m_document->visibleRange(row, level, t0, t1);
    // Adjacent fold marks of one category are merged into one rectangle (a run).
    struct FoldRun {
      bool active = false;
      Category category = Category::kOther;
      double x0 = 0;
      double x1 = 0;
    } run;
    auto flushRun = [&]() {
      if (!run.active) return;
      p.fillRect(QRectF(run.x0, yl, run.x1 - run.x0, hl),
                 palette.fold[static_cast<size_t>(run.category)]);
      ++m_paintedFolds;
      run.active = false;
    };
    size_t i = first;
    while (i < last) {
      const int32_t id = ids[i];
      const Span& s = spans[static_cast<size_t>(id)];
      double x0 = scale.toPixel(toDisplay(s.start));
      double x1 = scale.toPixel(toDisplay(s.end()));
      const QColor& color = palette.fill[static_cast<size_t>(s.category)];
      if (x1 - x0 < kFoldPx) {
        // Fold everything ending within the next kFoldPx pixels into one mark.
        double fx = std::floor(std::max(x0, left));
        Nanos next = toTrace(scale.toTime(fx + kFoldPx));
        size_t j = m_document->firstEndingAfter(row, level, i + 1, next);
        if (run.active && run.category == s.category && fx <= run.x1 + 0.01) {
          run.x1 = fx + kFoldPx;
        } else {
          flushRun();
          run = FoldRun{true, s.category, fx, fx + kFoldPx};
        }
        i = std::max(j, i + 1);
        continue;
      }
      flushRun();
      x0 = std::max(x0, left - 2);
      x1 = std::min(x1, right + 2);
      QRectF r(x0, yl, x1 - x0, hl);
      p.fillRect(r, color);
      if (r.width() > 4) {
        p.setPen(color.darker(135));
        p.drawRect(r.adjusted(0, 0, -1, -1));
      }
      if (r.width() > 28) {
        double visibleX0 = std::max(x0, left);
        double visibleX1 = std::min(x1, right);
        QRectF textRect(visibleX0 + 3, yl, visibleX1 - visibleX0 - 6, hl);
        if (textRect.width() > 12) {
          p.setPen(textColorOn(color));
          p.drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                     metrics.elidedText(QString::fromStdString(s.name), Qt::ElideRight,
                                        static_cast<int>(textRect.width())));
        }
      }
      SpanRef ref{row, id};
      bool match = !m_highlight.empty() && toLower(s.name).find(m_highlight) != std::string::npos;
      if (ref == m_selected || match || ref == m_hovered) {
        QColor outline = ref == m_selected ? QColor(Qt::black)
                         : match           ? QColor(0xE0, 0x00, 0xC0)
                                           : QColor(0x30, 0x30, 0x30, 120);
        p.setPen(QPen(outline, ref == m_hovered && !match && ref != m_selected ? 1 : 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
      }
      ++m_paintedSpans;
      ++i;
    }
    flushRun();
  }
}

std::optional<SpanRef> TimelineView::spanAt(QPoint point) const {
  if (!m_document || point.x() < kLabelColumnPx || point.x() > width() - kRightMarginPx) {
    return std::nullopt;
  }
  int y = point.y() + m_vbar->value();
  auto it = std::upper_bound(m_rowTop.begin(), m_rowTop.end(), y);
  if (it == m_rowTop.begin()) return std::nullopt;
  int row = static_cast<int>(it - m_rowTop.begin()) - 1;
  int level = (y - m_rowTop[static_cast<size_t>(row)] - 2) / kLevelHeightPx;
  if (level < 0 || level >= shownLevels(row)) return std::nullopt;
  TimeScale scale = timeScale();
  Nanos t = toTrace(scale.toTime(point.x()));
  if (auto exact = m_document->spanAt(row, level, t)) return exact;
  // Narrow spans: accept one within 2 px.
  Nanos slack = scale.durationOf(2.0);
  const auto& ids = m_document->levels(row)[static_cast<size_t>(level)].spans;
  size_t pos = m_document->firstEndingAfter(row, level, 0, t - slack);
  if (pos < ids.size()) {
    const Span& s = m_document->lane(row).spans[static_cast<size_t>(ids[pos])];
    if (s.start <= t + slack) return SpanRef{row, ids[pos]};
  }
  return std::nullopt;
}

void TimelineView::revealSpan(SpanRef ref) {
  if (!m_document || !ref.valid()) return;
  const Span& s = m_document->span(ref);
  Nanos margin = maxNanos(s.duration / 4, Nanos(500));
  m_zoom->zoomTo(toDisplay(s.start) - margin, toDisplay(s.end()) + margin);
  m_vbar->setValue(std::max(0, m_rowTop[static_cast<size_t>(ref.row)] - height() / 3));
  selectSpan(ref);
}

bool TimelineView::fitToIteration() {
  if (!m_document) return false;
  ZoomStack::Range range = m_zoom->range();
  Nanos centre = toTrace(range.start + (range.end - range.start) / 2);
  for (int r = 0; r < m_document->timeline().rankCount(); ++r) {
    const auto& its = m_document->iterations(r);
    if (its.empty()) continue;
    const traces::Iteration* chosen = &its.front();
    for (const auto& it : its) {
      if (it.start <= centre && centre < it.end()) chosen = &it;
    }
    Nanos pad = chosen->duration / 50;
    m_zoom->zoomTo(toDisplay(chosen->start) - pad, toDisplay(chosen->end()) + pad);
    return true;
  }
  return false;
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) steps = event->angleDelta().x() / 120.0;
  if (event->modifiers() & Qt::ShiftModifier) {
    m_vbar->setValue(m_vbar->value() - static_cast<int>(steps * 3 * kLevelHeightPx));
  } else if (event->position().x() >= kLabelColumnPx) {
    Nanos anchor = timeScale().toTime(event->position().x());
    m_zoom->zoomAround(anchor, std::pow(0.8, steps));
  } else {
    m_vbar->setValue(m_vbar->value() - static_cast<int>(steps * 3 * kLevelHeightPx));
  }
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    m_pressed = true;
    m_dragged = false;
    m_pressPos = m_lastPos = event->position().toPoint();
  }
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  QPoint pos = event->position().toPoint();
  if (m_pressed) {
    if ((pos - m_pressPos).manhattanLength() > 3) m_dragged = true;
    if (m_dragged) {
      int dx = pos.x() - m_lastPos.x();
      int dy = pos.y() - m_lastPos.y();
      if (dx != 0) m_zoom->panBy(-timeScale().durationOf(dx));
      if (dy != 0) m_vbar->setValue(m_vbar->value() - dy);
      m_lastPos = pos;
      setCursor(Qt::ClosedHandCursor);
    }
    return;
  }
  SpanRef hovered = spanAt(pos).value_or(SpanRef{});
  if (!(hovered == m_hovered)) {
    m_hovered = hovered;
    update();
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || !m_pressed) return;
  m_pressed = false;
  unsetCursor();
  if (!m_dragged) selectSpan(spanAt(event->position().toPoint()).value_or(SpanRef{}));
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
  if (auto ref = spanAt(event->position().toPoint())) revealSpan(*ref);
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  switch (event->key()) {
    case Qt::Key_Backspace:
      m_zoom->back();
      return;
    case Qt::Key_F:
      fitToIteration();
      return;
    case Qt::Key_0:
      m_zoom->reset();
      return;
    case Qt::Key_Plus:
    case Qt::Key_Equal: {
      auto r = m_zoom->range();
      m_zoom->zoomAround(r.start + (r.end - r.start) / 2, 0.5);
      return;
    }
    case Qt::Key_Minus: {
      auto r = m_zoom->range();
      m_zoom->zoomAround(r.start + (r.end - r.start) / 2, 2.0);
      return;
    }
    default:
      QWidget::keyPressEvent(event);
  }
}

bool TimelineView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    if (auto ref = spanAt(help->pos())) {
      QToolTip::showText(help->globalPos(),
                         QString::fromStdString(spanDetailsText(*m_document, *ref)), this);
    } else {
      QToolTip::hideText();
      event->ignore();
    }
    return true;
  }
  return QWidget::event(event);
}

// ---- CategoryLegend ----

CategoryLegend::CategoryLegend(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
}

QSize CategoryLegend::sizeHint() const {
  return {600, fontMetrics().height() + 8};
}

void CategoryLegend::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(0xF6, 0xF6, 0xF8));
  const Category shown[] = {
      Category::kForward,          Category::kBackward,  Category::kOptimizer,
      Category::kCompute,          Category::kCopy,      Category::kAllreduce,
      Category::kUsedMapAllreduce, Category::kBroadcast, Category::kIteration};
  int x = 8;
  const int h = height();
  QFontMetrics fm(font());
  p.setPen(Qt::black);
  for (Category c : shown) {
    p.fillRect(QRect(x, h / 2 - 5, 12, 10), categoryColor(c));
    x += 16;
    QString label = categoryLabel(c);
    p.drawText(QRect(x, 0, fm.horizontalAdvance(label) + 4, h), Qt::AlignVCenter, label);
    x += fm.horizontalAdvance(label) + 14;
  }
  QColor shade = exposedCommColor();
  shade.setAlpha(60);
  p.fillRect(QRect(x, h / 2 - 5, 12, 10), shade);
  p.fillRect(QRect(x, h / 2 + 2, 12, 3), exposedCommColor());
  x += 16;
  p.drawText(QRect(x, 0, 200, h), Qt::AlignVCenter, tr("exposed comm"));
}

}  // namespace ddpscope::gui
