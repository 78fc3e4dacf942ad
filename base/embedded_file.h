// A data file compiled into the binary (see cmake/EmbedFiles.cmake).
#pragma once

#include <string_view>

namespace ddpscope {

struct EmbeddedFile {
  std::string_view name;  // file stem, e.g. "resnet18"
  std::string_view text;  // whole file contents
};

}  // namespace ddpscope
