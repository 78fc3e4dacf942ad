#include "sim/cost/host_profile.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "base/setting_values.h"
#include "base/strings.h"
#include "io/json_reader.h"
#include "sim/cost/host_profile_data.h"

namespace ddpscope::sim {

namespace {

using Json = nlohmann::json;

// Below 1 s each: a larger value is a unit mistake (ms or ns given as µs).
constexpr double kMaxTermUs = 1e6;
const char* const kTermRange = "a number of µs in [0, 1e6]";

Status readDdp(const io::JsonReader& reader, const Json& object, const std::string& path,
               DdpOverheads& out) {
  RETURN_IF_ERROR(
      reader.checkKeys(object, path,
                       {"allreduce_launch_us", "grad_hook_us", "copy_back_us", "finalize_wait_us",
                        "step_overhead_us", "buffer_sync_us", "buffer_copy_us"}));
  for (const auto& [key, field] : ddpOverheadTerms()) {
    ASSIGN_OR_RETURN(out.*field, reader.number(object, path, key, 0, kMaxTermUs, 0.0, kTermRange));
  }
  return Status::ok();
}

const EmbeddedFile* findProfileFile(std::string_view name) {
  for (const EmbeddedFile& file : embeddedHostProfileFiles()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

}  // namespace

std::vector<HostTerm> hostProfileTerms() {
  return {{"module_us", &HostProfile::moduleUs},
          {"forward_op_us", &HostProfile::forwardOpUs},
          {"backward_node_us", &HostProfile::backwardNodeUs},
          {"launch_us", &HostProfile::launchUs},
          {"accumulate_grad_us", &HostProfile::accumulateGradUs},
          {"step_us", &HostProfile::stepUs},
          {"optimizer_us", &HostProfile::optimizerUs}};
}

std::vector<std::pair<const char*, double DdpOverheads::*>> ddpOverheadTerms() {
  return {{"allreduce_launch_us", &DdpOverheads::allreduceLaunchUs},
          {"grad_hook_us", &DdpOverheads::gradHookUs},
          {"copy_back_us", &DdpOverheads::copyBackUs},
          {"finalize_wait_us", &DdpOverheads::finalizeWaitUs},
          {"step_overhead_us", &DdpOverheads::stepOverheadUs},
          {"buffer_sync_us", &DdpOverheads::bufferSyncUs},
          {"buffer_copy_us", &DdpOverheads::bufferCopyUs}};
}

StatusOr<DdpOverheads> parseDdpOverheads(const Json& object, const std::string& origin,
                                         const std::string& path) {
  const io::JsonReader reader(origin);
  if (!object.is_object()) return reader.error(path, "an object of µs terms", &object);
  DdpOverheads out;
  RETURN_IF_ERROR(readDdp(reader, object, path, out));
  return out;
}

StatusOr<HostProfile> parseHostProfile(const Json& object, const std::string& origin,
                                       const std::string& path) {
  const io::JsonReader reader(origin);
  if (!object.is_object()) {
    return reader.error(path, "a host profile object (or a built-in profile's name)", &object);
  }
  RETURN_IF_ERROR(reader.checkKeys(
      object, path,
      {"name", "source", "stands_for", "module_us", "forward_op_us", "backward_node_us",
       "launch_us", "accumulate_grad_us", "step_us", "optimizer_us", "ddp", "profiler"}));
  HostProfile p;
  ASSIGN_OR_RETURN(p.name, reader.requiredString(object, path, "name"));
  ASSIGN_OR_RETURN(p.source, reader.requiredString(object, path, "source"));
  ASSIGN_OR_RETURN(p.standsFor, reader.requiredString(object, path, "stands_for"));
  for (const HostTerm& term : hostProfileTerms()) {
    ASSIGN_OR_RETURN(p.*term.field,
                     reader.number(object, path, term.key, 0, kMaxTermUs, 0.0, kTermRange));
  }
  ASSIGN_OR_RETURN(const Json* ddp, reader.object(object, path, "ddp", false));
  if (ddp) RETURN_IF_ERROR(readDdp(reader, *ddp, jsonKeyPath(path, "ddp"), p.ddp));
  ASSIGN_OR_RETURN(const Json* profiler, reader.object(object, path, "profiler", false));
  if (profiler) {
    const std::string at = jsonKeyPath(path, "profiler");
    RETURN_IF_ERROR(reader.checkKeys(*profiler, at, {"event_us", "module_us"}));
    ASSIGN_OR_RETURN(p.profilerEventUs,
                     reader.number(*profiler, at, "event_us", 0, kMaxTermUs, 0.0, kTermRange));
    ASSIGN_OR_RETURN(p.profilerModuleUs,
                     reader.number(*profiler, at, "module_us", 0, kMaxTermUs, 0.0, kTermRange));
  }
  return p;
}

Json ddpOverheadsJson(const DdpOverheads& o) {
  Json out = Json::object();
  for (const auto& [key, field] : ddpOverheadTerms()) out[key] = o.*field;
  return out;
}

Json hostProfileJson(const HostProfile& p) {
  Json out = {{"name", p.name}, {"source", p.source}, {"stands_for", p.standsFor}};
  for (const HostTerm& term : hostProfileTerms()) out[term.key] = p.*term.field;
  out["ddp"] = ddpOverheadsJson(p.ddp);
  out["profiler"] = {{"event_us", p.profilerEventUs}, {"module_us", p.profilerModuleUs}};
  return out;
}

std::vector<std::string> builtinHostProfileNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile& file : embeddedHostProfileFiles()) names.emplace_back(file.name);
  return names;
}

StatusOr<HostProfile> loadBuiltinHostProfile(std::string_view name) {
  const EmbeddedFile* file = findProfileFile(name);
  if (file == nullptr) {
    std::string names;
    for (const std::string& n : builtinHostProfileNames()) names += (names.empty() ? "" : ", ") + n;
    return notFound("no built-in host profile named \"" + std::string(name) +
                    "\" (built-in: " + names + ")");
  }
  const std::string origin = "host-profile:" + std::string(name);
  ASSIGN_OR_RETURN(Json doc, parseJsonObject(file->text, origin));
  return parseHostProfile(doc, origin, "");
}

StatusOr<HostProfile> loadHostProfile(const std::string& nameOrFile) {
  if (findProfileFile(nameOrFile) != nullptr) return loadBuiltinHostProfile(nameOrFile);
  if (!looksLikeFile(nameOrFile)) return loadBuiltinHostProfile(nameOrFile);
  ASSIGN_OR_RETURN(std::string text, readFileToString(nameOrFile));
  ASSIGN_OR_RETURN(Json doc, parseJsonObject(text, nameOrFile));
  return parseHostProfile(doc, nameOrFile, "");
}

}  // namespace ddpscope::sim
