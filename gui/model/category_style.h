// Colours and labels of span categories, shared by views, legends and model decorations.
#pragma once

#include <QColor>
#include <QString>

#include "traces/timeline.h"

namespace ddpscope::gui {

// Forward blue, backward green, optimizer purple, other compute grey-blue, copies amber,
// allreduce orange, used-map allreduce brown, other collectives teal/pink, markers grey.
QColor categoryColor(traces::Category category);
// "forward", "backward", "allreduce", "used-map allreduce", ...
QString categoryLabel(traces::Category category);
// The colour that marks exposed (not overlapped) communication.
QColor exposedCommColor();

}  // namespace ddpscope::gui
