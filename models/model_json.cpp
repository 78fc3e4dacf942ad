// Model JSON loader: parseModelJson / loadModelFile (format: models/FORMAT.md).
//
// Every error names the origin (file path or "zoo:NAME"), the JSON path of the offending
// value (e.g. `layers[5].params[0]`) and what was expected, and carries kInvalidArgument.
// nlohmann::json exceptions never leave this file.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "io/json_reader.h"
#include "models/model_spec.h"

namespace ddpscope::models {

namespace {

using Json = nlohmann::json;

constexpr size_t kMaxListedNames = 8;

std::string jsonQuoted(std::string_view text) {
  return Json(std::string(text)).dump();
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxListedNames; ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  if (names.size() > kMaxListedNames) out += ", ...";
  return out;
}

class ModelParser : private io::JsonReader {
 public:
  explicit ModelParser(std::string origin) : io::JsonReader(std::move(origin)) {}

  StatusOr<ModelSpec> parse(std::string_view text) {
    ASSIGN_OR_RETURN(Json root, parseJsonObject(text, origin()));

    ModelSpec spec;
    spec.origin = origin();
    ASSIGN_OR_RETURN(spec.name, requiredString(root, "", "name"));
    ASSIGN_OR_RETURN(spec.description, string(root, "", "description", ""));
    RETURN_IF_ERROR(parseInputs(root, spec));
    RETURN_IF_ERROR(parseParams(root, spec));
    RETURN_IF_ERROR(parseBuffers(root, spec));
    RETURN_IF_ERROR(parseLayers(root, spec));
    return spec;
  }

 private:
  Status parseInputs(const Json& root, ModelSpec& spec) const {
    const Json* inputs = find(root, "inputs");
    if (inputs == nullptr) return Status::ok();
    if (!inputs->is_object()) return error("inputs", "an object", inputs);
    const std::pair<const char*, int64_t*> fields[] = {
        {"batch", &spec.defaultInputs.batch},
        {"seq_len", &spec.defaultInputs.seqLen},
        {"image_size", &spec.defaultInputs.imageSize},
    };
    for (const auto& [key, target] : fields) {
      if (const Json* value = find(*inputs, key)) {
        ASSIGN_OR_RETURN(
            *target, integerValue(*value, jsonKeyPath("inputs", key), 0,
                                  std::numeric_limits<int64_t>::max(), "a non-negative integer"));
      }
    }
    return Status::ok();
  }

  // Shared by parameters (dims >= 1) and buffers (dims >= 0).
  Status parseShape(const Json& entry, const std::string& path, int64_t minDim,
                    std::vector<int64_t>& shape) const {
    const Json* value = find(entry, "shape");
    const std::string shapePath = jsonKeyPath(path, "shape");
    const char* expectedDim = minDim > 0 ? "a positive integer" : "a non-negative integer";
    if (value == nullptr || !value->is_array()) {
      return error(
          shapePath,
          std::string("an array of ") + (minDim > 0 ? "positive" : "non-negative") + " integers",
          value);
    }
    int64_t numel = 1;
    for (size_t i = 0; i < value->size(); ++i) {
      ASSIGN_OR_RETURN(int64_t dim, integerValue((*value)[i], jsonIndexPath(shapePath, i), minDim,
                                                 std::numeric_limits<int64_t>::max(), expectedDim));
      if (dim > 0 && numel > std::numeric_limits<int64_t>::max() / dim) {
        return error(shapePath, "a shape whose element count fits in int64", value);
      }
      numel *= dim;
      shape.push_back(dim);
    }
    return Status::ok();
  }

  StatusOr<DType> parseDTypeField(const Json& entry, const std::string& path) const {
    const Json* value = find(entry, "dtype");
    if (value == nullptr) return DType::kFloat32;
    const std::string dtypePath = jsonKeyPath(path, "dtype");
    if (!value->is_string()) {
      return error(dtypePath, "a dtype name (float32, float16, bfloat16, ...)", value);
    }
    StatusOr<DType> dtype = parseDType(value->get<std::string>());
    if (!dtype.isOk()) {
      return invalidArgument(origin() + ": " + dtypePath + ": " + dtype.status().message());
    }
    return dtype;
  }

  Status parseParams(const Json& root, ModelSpec& spec) {
    const Json* params = find(root, "parameters");
    if (params == nullptr || !params->is_array() || params->empty()) {
      return error("parameters", "a non-empty array of parameter objects", params);
    }
    for (size_t i = 0; i < params->size(); ++i) {
      const Json& entry = (*params)[i];
      const std::string path = jsonIndexPath("parameters", i);
      if (!entry.is_object()) return error(path, "a parameter object", &entry);
      ParamSpec param;
      ASSIGN_OR_RETURN(param.name, requiredString(entry, path, "name"));
      auto [it, inserted] = m_paramIndex.emplace(param.name, static_cast<int>(i));
      if (!inserted) {
        return error(jsonKeyPath(path, "name"),
                     "a unique parameter name (already used by parameters[" +
                         std::to_string(it->second) + "])",
                     find(entry, "name"));
      }
      RETURN_IF_ERROR(parseShape(entry, path, 1, param.shape));
      ASSIGN_OR_RETURN(param.dtype, parseDTypeField(entry, path));
      if (const Json* sparse = find(entry, "sparse_grad")) {
        if (!sparse->is_boolean())
          return error(jsonKeyPath(path, "sparse_grad"), "true or false", sparse);
        param.sparseGrad = sparse->get<bool>();
      }
      spec.params.push_back(std::move(param));
    }
    return Status::ok();
  }

  Status parseBuffers(const Json& root, ModelSpec& spec) const {
    const Json* buffers = find(root, "buffers");
    if (buffers == nullptr) return Status::ok();
    if (!buffers->is_array()) return error("buffers", "an array of buffer objects", buffers);
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < buffers->size(); ++i) {
      const Json& entry = (*buffers)[i];
      const std::string path = jsonIndexPath("buffers", i);
      if (!entry.is_object()) return error(path, "a buffer object", &entry);
      BufferSpec buffer;
      ASSIGN_OR_RETURN(buffer.name, requiredString(entry, path, "name"));
      auto [it, inserted] = seen.emplace(buffer.name, i);
      if (!inserted) {
        return error(
            jsonKeyPath(path, "name"),
            "a unique buffer name (already used by buffers[" + std::to_string(it->second) + "])",
            find(entry, "name"));
      }
      RETURN_IF_ERROR(parseShape(entry, path, 0, buffer.shape));
      ASSIGN_OR_RETURN(buffer.dtype, parseDTypeField(entry, path));
      spec.buffers.push_back(std::move(buffer));
    }
    return Status::ok();
  }

  // {"batch*seq": 1536.0, "1": 7}
  StatusOr<CostPoly> parsePoly(const Json& value, const std::string& path) const {
    if (!value.is_object()) {
      return error(path, "a polynomial object such as {\"batch*seq\": 1536, \"1\": 7}", &value);
    }
    CostPoly poly;
    for (const auto& [key, coef] : value.items()) {
      const std::string termPath = path + "[" + jsonQuoted(key) + "]";
      CostPoly::Term term;
      bool valid = !key.empty();
      if (trimString(key) != "1") {
        for (const std::string& factor : splitString(key, '*')) {
          std::string_view name = trimString(factor);
          if (name == "batch") {
            ++term.batchPow;
          } else if (name == "seq") {
            ++term.seqPow;
          } else if (name == "image") {
            ++term.imagePow;
          } else {
            valid = false;
          }
        }
      }
      if (!valid) {
        Json keyJson = key;
        return error(termPath, "a monomial: \"1\" or a product of batch, seq, image joined by '*'",
                     &keyJson);
      }
      if (!coef.is_number() || !std::isfinite(coef.get<double>())) {
        return error(termPath, "a finite number (the coefficient)", &coef);
      }
      term.coef = coef.get<double>();
      poly.terms.push_back(term);
    }
    return poly;
  }

  // Parameter names -> indices; no duplicates inside one list.
  Status parseParamNames(const Json& value, const std::string& path,
                         std::vector<int>& indices) const {
    if (!value.is_array()) return error(path, "an array of parameter names", &value);
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& name = value[i];
      const std::string itemPath = jsonIndexPath(path, i);
      if (!name.is_string()) return error(itemPath, "a parameter name (string)", &name);
      auto it = m_paramIndex.find(name.get<std::string>());
      if (it == m_paramIndex.end()) {
        return error(itemPath, "the name of a parameter listed in `parameters`", &name);
      }
      if (std::find(indices.begin(), indices.end(), it->second) != indices.end()) {
        return error(itemPath, "each parameter at most once in this list", &name);
      }
      indices.push_back(it->second);
    }
    return Status::ok();
  }

  Status parseReadyOrder(const Json& value, const std::string& path, const ModelSpec& spec,
                         LayerSpec& layer) const {
    if (!value.is_array()) {
      return error(path, "an array of parameter names (a permutation of the layer's params)",
                   &value);
    }
    std::vector<std::string> owned;
    for (int param : layer.params) owned.push_back(spec.params[param].name);
    const std::string ownedText =
        "layer " + jsonQuoted(layer.name) + " owns [" + joinNames(owned) + "]";
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& name = value[i];
      const std::string itemPath = jsonIndexPath(path, i);
      if (!name.is_string()) return error(itemPath, "a parameter name (string)", &name);
      auto it = m_paramIndex.find(name.get<std::string>());
      if (it == m_paramIndex.end() ||
          std::find(layer.params.begin(), layer.params.end(), it->second) == layer.params.end()) {
        return error(itemPath, "one of the layer's own params (" + ownedText + ")", &name);
      }
      if (std::find(layer.gradReadyOrder.begin(), layer.gradReadyOrder.end(), it->second) !=
          layer.gradReadyOrder.end()) {
        return error(itemPath,
                     "a permutation of the layer's params, each exactly once (" + ownedText + ")",
                     &name);
      }
      layer.gradReadyOrder.push_back(it->second);
    }
    if (layer.gradReadyOrder.size() != layer.params.size()) {
      return error(path,
                   "a permutation of the layer's params (" + std::to_string(layer.params.size()) +
                       " names; " + ownedText + ")",
                   &value);
    }
    return Status::ok();
  }

  StatusOr<UsePattern> parseUse(const Json& value, const std::string& path) const {
    if (!value.is_object()) {
      return error(path, "a use pattern object {\"period\": K, \"phase\": j, \"ranks\": [...]}",
                   &value);
    }
    UsePattern use;
    constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
    if (const Json* period = find(value, "period")) {
      ASSIGN_OR_RETURN(use.period, integerValue(*period, jsonKeyPath(path, "period"), 1, kMaxInt,
                                                "an integer >= 1"));
    }
    if (const Json* phase = find(value, "phase")) {
      ASSIGN_OR_RETURN(use.phase,
                       integerValue(*phase, jsonKeyPath(path, "phase"), 0, use.period - 1,
                                    "an integer in [0, " + std::to_string(use.period) +
                                        ") (0 <= phase < period)"));
    }
    if (const Json* ranks = find(value, "ranks")) {
      const std::string ranksPath = jsonKeyPath(path, "ranks");
      if (!ranks->is_array()) return error(ranksPath, "an array of rank numbers", ranks);
      for (size_t i = 0; i < ranks->size(); ++i) {
        ASSIGN_OR_RETURN(int64_t rank, integerValue((*ranks)[i], jsonIndexPath(ranksPath, i), 0,
                                                    kMaxInt, "a non-negative integer rank"));
        use.ranks.push_back(static_cast<int>(rank));
      }
    }
    return use;
  }

  Status parseLayers(const Json& root, ModelSpec& spec) const {
    const Json* layers = find(root, "layers");
    if (layers == nullptr) return Status::ok();
    if (!layers->is_array()) return error("layers", "an array of layer objects", layers);
    std::map<std::string, size_t> layerIndex;
    for (size_t i = 0; i < layers->size(); ++i) {
      const Json& entry = (*layers)[i];
      const std::string path = jsonIndexPath("layers", i);
      if (!entry.is_object()) return error(path, "a layer object", &entry);
      LayerSpec layer;
      ASSIGN_OR_RETURN(layer.name, requiredString(entry, path, "name"));
      if (layer.name == kModelInputName) {
        return error(jsonKeyPath(path, "name"),
                     "a layer name other than the reserved " + jsonQuoted(kModelInputName),
                     find(entry, "name"));
      }
      if (auto it = layerIndex.find(layer.name); it != layerIndex.end()) {
        return error(
            jsonKeyPath(path, "name"),
            "a unique layer name (already used by layers[" + std::to_string(it->second) + "])",
            find(entry, "name"));
      }
      ASSIGN_OR_RETURN(layer.type, requiredString(entry, path, "type"));
      if (const Json* params = find(entry, "params")) {
        RETURN_IF_ERROR(parseParamNames(*params, jsonKeyPath(path, "params"), layer.params));
      }
      if (const Json* order = find(entry, "grad_ready_order")) {
        RETURN_IF_ERROR(
            parseReadyOrder(*order, jsonKeyPath(path, "grad_ready_order"), spec, layer));
      } else {
        layer.gradReadyOrder = defaultGradReadyOrder(layer.type, layer.params);
      }
      if (const Json* flops = find(entry, "flops")) {
        ASSIGN_OR_RETURN(layer.forwardFlops, parsePoly(*flops, jsonKeyPath(path, "flops")));
      }
      if (const Json* bytes = find(entry, "bytes")) {
        ASSIGN_OR_RETURN(layer.forwardBytes, parsePoly(*bytes, jsonKeyPath(path, "bytes")));
      }
      if (const Json* backward = find(entry, "backward_flops")) {
        ASSIGN_OR_RETURN(layer.backwardFlops,
                         parsePoly(*backward, jsonKeyPath(path, "backward_flops")));
      }
      if (const Json* attrs = find(entry, "attrs")) {
        const std::string attrsPath = jsonKeyPath(path, "attrs");
        if (!attrs->is_object()) return error(attrsPath, "an object of numbers", attrs);
        for (const auto& [key, value] : attrs->items()) {
          if (value.is_boolean()) {
            layer.attrs[key] = value.get<bool>() ? 1.0 : 0.0;
          } else if (value.is_number()) {
            layer.attrs[key] = value.get<double>();
          } else {
            return error(attrsPath + "[" + jsonQuoted(key) + "]", "a number", &value);
          }
        }
      }
      if (const Json* inputs = find(entry, "inputs")) {
        const std::string inputsPath = jsonKeyPath(path, "inputs");
        if (!inputs->is_array()) return error(inputsPath, "an array of layer names", inputs);
        for (size_t j = 0; j < inputs->size(); ++j) {
          const Json& producer = (*inputs)[j];
          if (!producer.is_string() || (producer.get_ref<const std::string&>() != kModelInputName &&
                                        !layerIndex.contains(producer.get<std::string>()))) {
            return error(jsonIndexPath(inputsPath, j),
                         jsonQuoted(kModelInputName) + " or the name of an earlier layer",
                         &producer);
          }
          layer.inputs.push_back(producer.get<std::string>());
        }
      }
      if (const Json* use = find(entry, "use")) {
        ASSIGN_OR_RETURN(layer.use, parseUse(*use, jsonKeyPath(path, "use")));
      }
      if (const Json* ops = find(entry, "host_ops")) {
        const std::string opsPath = jsonKeyPath(path, "host_ops");
        if (!ops->is_object())
          return error(opsPath, "an object {\"forward\": N, \"backward\": N}", ops);
        RETURN_IF_ERROR(checkKeys(
            *ops, opsPath, {"forward", "backward", "forward_launches", "backward_launches"}));
        for (const auto& [key, target] :
             {std::pair<const char*, double*>{"forward_launches", &layer.forwardLaunches},
              {"backward_launches", &layer.backwardLaunches}}) {
          if (find(*ops, key) != nullptr) {
            ASSIGN_OR_RETURN(*target, number(*ops, opsPath, key, 0, 100000, std::nullopt,
                                             "a number of runtime calls in [0, 100000]"));
          }
        }
        for (const auto& [key, target] :
             {std::pair<const char*, int*>{"forward", &layer.forwardOps},
              {"backward", &layer.backwardOps}}) {
          if (const Json* n = find(*ops, key)) {
            ASSIGN_OR_RETURN(int64_t count, integerValue(*n, jsonKeyPath(opsPath, key), 0, 100000,
                                                         "an op count in [0, 100000]"));
            *target = static_cast<int>(count);
          }
        }
      }
      layerIndex.emplace(layer.name, i);
      spec.layers.push_back(std::move(layer));
    }
    return Status::ok();
  }

  std::map<std::string, int> m_paramIndex;  // parameter name -> index
};

}  // namespace

StatusOr<ModelSpec> parseModelJson(std::string_view text, const std::string& origin) {
  try {
    return ModelParser(origin).parse(text);
  } catch (const Json::exception& e) {
    // Only reachable through a bug in the checks above; still a value, never a throw.
    return invalidArgument(origin + ": (document): expected a valid model; " + e.what());
  }
}

StatusOr<ModelSpec> loadModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  return parseModelJson(text, path);
}

}  // namespace ddpscope::models
