#include "gui/widgets/time_axis.h"

#include <QPainter>
#include <algorithm>

#include "gui/model/time_scale.h"
#include "gui/widgets/timeline_view.h"

namespace ddpscope::gui {

TimeAxis::TimeAxis(ZoomStack* zoom, QWidget* parent) : QWidget(parent), m_zoom(zoom) {
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  connect(m_zoom, &ZoomStack::rangeChanged, this, qOverload<>(&QWidget::update));
}

void TimeAxis::setCaption(const QString& caption) {
  m_caption = caption;
  update();
}

QSize TimeAxis::sizeHint() const {
  return {600, fontMetrics().height() + 12};
}

void TimeAxis::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), QColor(0xF6, 0xF6, 0xF8));
  TimeScale scale = viewTimeScale(m_zoom->range(), width());
  const int h = height();
  p.setPen(QColor(0x50, 0x50, 0x60));
  p.drawText(QRect(6, 0, kLabelColumnPx - 10, h), Qt::AlignVCenter | Qt::AlignLeft,
             m_caption.isEmpty() ? tr("time") : m_caption);
  // Span of the window, top right.
  QString span = QString::fromStdString(formatDuration(scale.span())) + tr(" shown");
  p.setClipRect(kLabelColumnPx, 0, width() - kLabelColumnPx, h);
  p.setPen(QColor(0x90, 0x90, 0xA0));
  p.drawLine(kLabelColumnPx, h - 1, width(), h - 1);
  QFontMetrics fm(font());
  int lastLabelEnd = kLabelColumnPx - 4;
  const int spanLeft = width() - kRightMarginPx - fm.horizontalAdvance(span) - 12;
  for (const TimeTick& tick : computeTicks(scale, 90.0)) {
    int x = static_cast<int>(std::lround(tick.x));
    p.setPen(QColor(0x60, 0x60, 0x70));
    p.drawLine(x, h - 6, x, h - 1);
    QString label = QString::fromStdString(tick.label);
    int w = fm.horizontalAdvance(label);
    int labelLeft = std::max(x - w / 2, kLabelColumnPx + 2);
    if (labelLeft > lastLabelEnd + 6 && labelLeft + w < spanLeft) {
      p.setPen(QColor(0x20, 0x20, 0x30));
      p.drawText(QRect(labelLeft, 0, w + 2, h - 6), Qt::AlignCenter, label);
      lastLabelEnd = labelLeft + w;
    }
  }
  p.setPen(QColor(0x70, 0x70, 0x80));
  int sw = fm.horizontalAdvance(span);
  p.fillRect(QRect(width() - kRightMarginPx - sw - 10, 0, sw + 10, h - 6),
             QColor(0xF6, 0xF6, 0xF8));
  p.drawText(QRect(width() - kRightMarginPx - sw - 6, 0, sw + 4, h - 6), Qt::AlignCenter, span);
}

}  // namespace ddpscope::gui
