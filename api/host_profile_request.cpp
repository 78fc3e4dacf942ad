#include "api/host_profile_request.h"

#include <nlohmann/json.hpp>

#include "api/cluster_settings.h"
#include "api/load_each.h"

namespace ddpscope::api {

StatusOr<std::vector<sim::HostProfile>> builtinHostProfiles() {
  return loadEach<sim::HostProfile>(sim::builtinHostProfileNames(), sim::loadBuiltinHostProfile);
}

StatusOr<sim::HostProfile> builtinHostProfile(const std::string& name) {
  return sim::loadBuiltinHostProfile(name);
}

std::string hostProfileText(const sim::HostProfile& profile) {
  return sim::hostProfileJson(profile).dump(2) + "\n";
}

std::vector<SettingSpec> hostProfileFitSettingList() {
  return {{"facts", "FACTS.json", "host facts (scripts/gpu_kit/host_facts.py)"},
          {"hold-out", "MODEL", "fit without this model and predict it"},
          {"name", "N", "the profile's name (default: fitted)"},
          {"stands-for", "TEXT", "what the profile stands for: PyTorch, CPU, settings"}};
}

StatusOr<HostProfileFitRequest> parseHostProfileFitRequest(const SettingValues& values) {
  if (!values.has("facts")) return invalidArgument("--facts: required (host_facts.py's JSON)");
  HostProfileFitRequest request;
  ASSIGN_OR_RETURN(request.facts, sim::replay::loadHostFacts(*values.value("facts")));
  SettingValues clusterValues = values;
  if (!clusterValues.has("cluster")) clusterValues.set("cluster", "dgx-h100");
  ASSIGN_OR_RETURN(request.cluster, loadClusterFromSettings(clusterValues));
  request.heldOut = values.value("hold-out").value_or("");
  bool found = request.heldOut.empty();
  for (const sim::replay::HostFacts& f : request.facts) found = found || f.model == request.heldOut;
  if (!found) return invalidArgument("--hold-out: no model '" + request.heldOut + "' in the facts");
  request.name = values.value("name").value_or("fitted");
  request.standsFor = values.value("stands-for");
  return request;
}

StatusOr<HostProfileFitResult> runHostProfileFit(const HostProfileFitRequest& request) {
  std::vector<const sim::replay::HostFacts*> fitOn;
  for (const sim::replay::HostFacts& f : request.facts) {
    if (f.model != request.heldOut) fitOn.push_back(&f);
  }
  HostProfileFitResult result;
  ASSIGN_OR_RETURN(result.fit, sim::replay::fitHostProfile(fitOn, request.cluster, request.name));
  if (request.standsFor) result.fit.profile.standsFor = *request.standsFor;
  result.fittedOn = static_cast<int>(fitOn.size());
  for (const sim::replay::HostFacts& f : request.facts) {
    ASSIGN_OR_RETURN(sim::replay::HostSimulation s,
                     sim::replay::simulateHostFacts(f, request.cluster, result.fit.profile));
    result.rows.push_back({f.model, f.model == request.heldOut, s.eagerMs,
                           f.measuredMedianMs("eager"), s.ddpMs,
                           f.measuredMedianMs("ddp-default")});
  }
  return result;
}

nlohmann::json hostProfileFitJson(const HostProfileFitResult& result) {
  nlohmann::json rows = nlohmann::json::array();
  for (const HostProfileFitRow& r : result.rows) {
    rows.push_back({{"model", r.model},
                    {"held_out", r.heldOut},
                    {"eager_ms", r.eagerMs},
                    {"measured_eager_ms", r.measuredEagerMs},
                    {"ddp_ms", r.ddpMs},
                    {"measured_ddp_ms", r.measuredDdpMs}});
  }
  return {{"profile", sim::hostProfileJson(result.fit.profile)},
          {"models", rows},
          {"notes", result.fit.notes}};
}

}  // namespace ddpscope::api
