#include "models/model_resolver.h"

#include <string>

#include "base/setting_values.h"
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
  if (looksLikeFile(path)) return loadModelFile(path);
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

}  // namespace ddpscope::models
