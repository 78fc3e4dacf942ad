#include "gui/model/category_style.h"

namespace ddpscope::gui {

using traces::Category;

QColor categoryColor(Category category) {
  switch (category) {
    case Category::kForward:
      return QColor(0x4C, 0x8B, 0xD6);
    case Category::kBackward:
      return QColor(0x4C, 0xAF, 0x50);
    case Category::kOptimizer:
      return QColor(0x9C, 0x6A, 0xDE);
    case Category::kCompute:
      return QColor(0x78, 0x90, 0xA8);
    case Category::kCopy:
      return QColor(0xF2, 0xC1, 0x4E);
    case Category::kAllreduce:
      return QColor(0xF5, 0x8A, 0x1F);
    case Category::kUsedMapAllreduce:
      return QColor(0xA0, 0x52, 0x2D);
    case Category::kBroadcast:
      return QColor(0x26, 0xA6, 0x9A);
    case Category::kAllgather:
      return QColor(0xE0, 0x5F, 0x9E);
    case Category::kReduceScatter:
      return QColor(0xC0, 0x47, 0x8A);
    case Category::kCommOther:
      return QColor(0xD0, 0x90, 0x40);
    case Category::kIteration:
      return QColor(0xC8, 0xC8, 0xC8);
    case Category::kOther:
      return QColor(0xB0, 0xB0, 0xB0);
  }
  return QColor(0xB0, 0xB0, 0xB0);
}

QString categoryLabel(Category category) {
  if (category == Category::kUsedMapAllreduce) return QStringLiteral("used-map allreduce");
  if (category == Category::kReduceScatter) return QStringLiteral("reduce-scatter");
  return QString::fromUtf8(traces::categoryName(category));
}

QColor exposedCommColor() {
  return QColor(0xE5, 0x39, 0x35);
}

}  // namespace ddpscope::gui
