// TimeAxis: the tick ruler over one or more TimelineViews sharing its ZoomStack. Ticks come
// from computeTicks() (nice 1-2-5 steps, labels in ns/µs/ms/s relative to display time 0).
#pragma once

#include <QWidget>

#include "gui/model/zoom_stack.h"

namespace ddpscope::gui {

class TimeAxis : public QWidget {
  Q_OBJECT
 public:
  explicit TimeAxis(ZoomStack* zoom, QWidget* parent = nullptr);
  void setCaption(const QString& caption);  // left of the ticks, e.g. "time since step start"
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  ZoomStack* m_zoom;
  QString m_caption;
};

}  // namespace ddpscope::gui
