#include "models/model_resolver.h"

#include <filesystem>
#include <string>

#include "base/strings.h"
#include "models/builders.h"
#include "models/zoo.h"

namespace ddpscope::models {

StatusOr<ModelSpec> resolveModel(std::string_view text) {
  const std::string_view trimmed = trimString(text);
  if (trimmed.empty()) return invalidArgument("model: expected a zoo name, a shorthand or a file");
  if (isModelShorthand(trimmed)) return parseModelShorthand(trimmed);
  if (!zooModelJson(trimmed).empty()) return loadZooModel(trimmed);
  const std::string path(trimmed);
  std::error_code ec;
  if (path.find('/') != std::string::npos || path.ends_with(".json") ||
      std::filesystem::is_regular_file(path, ec)) {
    return loadModelFile(path);
  }
  std::string available;
  for (const std::string& known : zooModelNames()) {
    if (!available.empty()) available += ", ";
    available += known;
  }
  return notFound("no zoo model named \"" + path +
                  "\" (nor a shorthand such as gpt2:layers=2 "
                  "or a model file: a path or NAME.json); available: " +
                  available);
}

std::vector<SettingSpec> modelSettingList() {
  return {
      {"model", "M", std::string(kModelArgumentHelp)},
      {"model-file", "PATH", "a model JSON file (models/FORMAT.md); a parameter list suffices"}};
}

StatusOr<ModelSpec> loadModelFromSettings(const SettingValues& values) {
  ASSIGN_OR_RETURN(const NamedOrFile which, namedOrFile(values, "model"));
  if (which.name) return resolveModel(*which.name);
  return loadModelFile(*which.file);
}

}  // namespace ddpscope::models
