#include "sim/cli/common.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "models/zoo.h"

namespace ddpscope::cli {

void addModelFlags(ArgParser& parser) {
  parser.option("model", "NAME", "a zoo model (see 'ddpscope models')")
      .option("model-file", "PATH", "a model JSON file (models/FORMAT.md); a parameter list suffices");
}

StatusOr<models::ModelSpec> loadModelFromFlags(const ParsedArgs& args) {
  auto name = args.value("model");
  auto file = args.value("model-file");
  if (name && file) return invalidArgument("give either --model or --model-file, not both");
  if (name) return models::loadZooModel(*name);
  if (file) return models::loadModelFile(*file);
  return invalidArgument("expected --model NAME or --model-file PATH");
}

StatusOr<std::vector<int>> parseIndexList(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::string token;
  int position = 0;
  auto flush = [&]() -> Status {
    if (token.empty()) return Status::ok();
    auto v = parseInt64(token);
    if (!v || *v < 0 || *v > INT32_MAX) {
      return invalidArgument(what + ": entry " + std::to_string(position) +
                             ": expected a non-negative parameter index, got '" + token + "'");
    }
    out.push_back(static_cast<int>(*v));
    ++position;
    token.clear();
    return Status::ok();
  };
  for (char c : text) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      RETURN_IF_ERROR(flush());
    } else {
      token.push_back(c);
    }
  }
  RETURN_IF_ERROR(flush());
  if (out.empty()) return invalidArgument(what + ": expected a list of parameter indices, got nothing");
  return out;
}

StatusOr<std::vector<int>> readIndexListFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  std::string_view trimmed = trimString(text);
  if (!trimmed.empty() && (trimmed.front() == '[' || trimmed.front() == '{')) {
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return invalidArgument(path + ": invalid JSON");
    const nlohmann::json* list = &doc;
    std::string where = path;
    if (doc.is_object()) {
      if (!doc.contains("grad_ready_order")) {
        return invalidArgument(path + ": expected a JSON array of parameter indices or an object "
                                      "with \"grad_ready_order\"");
      }
      list = &doc["grad_ready_order"];
      where = path + ": grad_ready_order";
    }
    if (!list->is_array()) return invalidArgument(where + ": expected an array of parameter indices");
    std::vector<int> out;
    for (size_t i = 0; i < list->size(); ++i) {
      const auto& v = (*list)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return invalidArgument(where + "[" + std::to_string(i) +
                               "]: expected a non-negative integer parameter index, got " + v.dump());
      }
      out.push_back(v.get<int>());
    }
    if (out.empty()) return invalidArgument(where + ": expected a non-empty list of parameter indices");
    return out;
  }
  return parseIndexList(text, path);
}

}  // namespace ddpscope::cli
