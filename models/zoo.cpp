#include "models/zoo.h"

#include "models/zoo_data.h"

namespace ddpscope::models {

namespace {

const EmbeddedFile* findZooFile(std::string_view name) {
  for (const EmbeddedFile& file : embeddedZooFiles()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> zooModelNames() {
  // The embedded list is already sorted by name (EmbedFiles.cmake sorts the inputs).
  std::vector<std::string> names;
  for (const EmbeddedFile& file : embeddedZooFiles()) names.emplace_back(file.name);
  return names;
}

StatusOr<ModelSpec> loadZooModel(std::string_view name) {
  const EmbeddedFile* file = findZooFile(name);
  if (file == nullptr) {
    std::string available;
    for (const std::string& known : zooModelNames()) {
      if (!available.empty()) available += ", ";
      available += known;
    }
    return notFound("no zoo model named \"" + std::string(name) + "\"; available: " + available);
  }
  return parseModelJson(file->text, "zoo:" + std::string(name));
}

std::string_view zooModelJson(std::string_view name) {
  const EmbeddedFile* file = findZooFile(name);
  return file == nullptr ? std::string_view() : file->text;
}

}  // namespace ddpscope::models
