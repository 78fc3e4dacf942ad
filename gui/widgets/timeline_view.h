// TimelineView: paints one TraceDocument — a row group per rank, one row per lane, nesting
// levels stacked inside a row — over the window of a (possibly shared) ZoomStack.
//
// Painting is bounded by pixels, not events: for every visible row and level the visible spans
// come from two binary searches (TraceDocument::visibleRange); a span narrower than
// kFoldPx pixels is drawn as one fold mark covering everything that ends within the next
// kFoldPx pixels, and the painter jumps past those spans by binary search; adjacent fold marks
// of one category merge into one rectangle. Exposed
// communication (comm not overlapped by compute) is shaded red on comm lanes, with a solid red
// strip along the lane's bottom.
//
// Interaction: wheel zooms around the cursor (Shift+wheel scrolls vertically), left-drag pans,
// a click selects the span under the cursor (spanSelected), a double click zooms to it, hovering
// shows a tooltip (name, duration, bucket, bytes, busbw). Backspace goes back in the zoom
// history. Display time = trace time − offset (a comparison aligns both runs at t = 0).
#pragma once

#include <QString>
#include <QWidget>
#include <optional>
#include <vector>

#include "gui/model/time_scale.h"
#include "gui/model/trace_document.h"
#include "gui/model/zoom_stack.h"

class QScrollBar;

namespace ddpscope::gui {

// Width of the label column and of the right margin every time-aligned widget reserves (so
// axes and stacked timelines share one TimeScale for one widget width).
inline constexpr int kLabelColumnPx = 150;
inline constexpr int kRightMarginPx = 14;
// The TimeScale for a widget of width `widthPx` showing `range`.
TimeScale viewTimeScale(const ZoomStack::Range& range, int widthPx);

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  static constexpr double kFoldPx = 2.0;
  static constexpr int kLevelHeightPx = 17;
  static constexpr int kMaxShownLevels = 6;
  static constexpr int kRankHeaderPx = 18;

  explicit TimelineView(ZoomStack* zoom, QWidget* parent = nullptr);

  void setDocument(TraceDocumentPtr document, Nanos offset);
  const TraceDocumentPtr& document() const { return m_document; }
  Nanos offset() const { return m_offset; }
  void setTitle(const QString& title);
  // Outlines spans whose name contains `text` (case-insensitive); empty clears.
  void setHighlight(const QString& text);

  SpanRef selected() const { return m_selected; }
  void selectSpan(SpanRef ref);
  // Zooms to the span (with margins), scrolls it into view and selects it.
  void revealSpan(SpanRef ref);
  // Zooms to the iteration containing the centre of the view (first rank with iterations),
  // else the first iteration. False when the trace has no iterations.
  bool fitToIteration();

  TimeScale timeScale() const { return viewTimeScale(m_zoom->range(), width()); }
  // The span under a widget point, if any.
  std::optional<SpanRef> spanAt(QPoint point) const;
  int contentHeight() const { return m_contentHeight; }
  int rowTop(int row) const { return m_rowTop[static_cast<size_t>(row)]; }
  // Spans drawn and fold marks drawn by the last paint (for benchmarks and tests).
  int lastPaintedSpans() const { return m_paintedSpans; }
  int lastPaintedFolds() const { return m_paintedFolds; }
  QSize sizeHint() const override { return {900, 400}; }

 signals:
  void spanSelected(ddpscope::gui::SpanRef ref);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool event(QEvent* event) override;

 private:
  void relayout();
  int rowHeight(int row) const;
  int shownLevels(int row) const;
  void paintRow(class QPainter& p, int row, int y, const TimeScale& scale);
  Nanos toTrace(Nanos display) const { return display + m_offset; }
  Nanos toDisplay(Nanos trace) const { return trace - m_offset; }

  ZoomStack* m_zoom;
  QScrollBar* m_vbar;
  TraceDocumentPtr m_document;
  Nanos m_offset;
  QString m_title;
  std::string m_highlight;  // lower-case
  SpanRef m_selected;
  SpanRef m_hovered;
  std::vector<int> m_rowTop;  // content y of each row
  int m_contentHeight = 0;
  // drag state
  bool m_pressed = false;
  bool m_dragged = false;
  QPoint m_pressPos;
  QPoint m_lastPos;
  int m_paintedSpans = 0;
  int m_paintedFolds = 0;
};

// Category swatches and the exposed-communication marker, for under a timeline.
class CategoryLegend : public QWidget {
  Q_OBJECT
 public:
  explicit CategoryLegend(QWidget* parent = nullptr);
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
};

}  // namespace ddpscope::gui
