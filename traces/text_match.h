// Not public API: a string test shared by the classifiers of traces/ (classify.cpp,
// kineto_import.cpp). std::string_view::contains is C++23; this project is C++20.
#pragma once

#include <string_view>

namespace ddpscope::traces {

// True when `part` occurs in `text` (case-sensitive; an empty `part` always occurs).
inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace ddpscope::traces
