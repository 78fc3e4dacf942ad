#include "models/zoo.h"

#include <map>
#include <mutex>

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
  // The zoo is embedded and immutable: each model is parsed once per process (the GUI's what-if
  // reads its model again on every change) and copied out.
  static std::mutex mutex;
  static std::map<std::string, ModelSpec, std::less<>> parsed;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = parsed.find(name); it != parsed.end()) return it->second;
  ASSIGN_OR_RETURN(ModelSpec model, parseModelJson(file->text, "zoo:" + std::string(name)));
  return parsed.emplace(std::string(name), std::move(model)).first->second;
}

std::string_view zooModelJson(std::string_view name) {
  const EmbeddedFile* file = findZooFile(name);
  return file == nullptr ? std::string_view() : file->text;
}

}  // namespace ddpscope::models
