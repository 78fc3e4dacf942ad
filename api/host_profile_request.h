// `ddpscope host-profile list | show | fit`: the built-in host profiles, and a profile fitted to
// the host facts of profiled PyTorch steps (sim/replay/host_fit.h) with each model's simulated
// steps against the measured ones. The CLI prints the fit as a table or hostProfileFitJson.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/host_profile.h"
#include "sim/replay/host_fit.h"

namespace ddpscope::api {

// Every built-in host profile, in `host-profile list` order, and one by name.
StatusOr<std::vector<sim::HostProfile>> builtinHostProfiles();
StatusOr<sim::HostProfile> builtinHostProfile(const std::string& name);
// The profile's JSON text (sim/cost/host_profiles/FORMAT.md), indented, with a final newline:
// what `show` prints and `fit -o FILE` writes.
std::string hostProfileText(const sim::HostProfile& profile);

// "facts", "hold-out", "name", "stands-for" (the cluster is clusterSettingList's "cluster").
std::vector<SettingSpec> hostProfileFitSettingList();

struct HostProfileFitRequest {
  std::vector<sim::replay::HostFacts> facts;
  sim::ClusterSpec cluster;  // default dgx-h100
  std::string heldOut;       // "" = fit on every model
  std::string name;          // default "fitted"
  std::optional<std::string> standsFor;
};
// Errors in this order: --facts missing, the facts file, the cluster, --hold-out naming no model.
StatusOr<HostProfileFitRequest> parseHostProfileFitRequest(const SettingValues& values);

struct HostProfileFitRow {
  std::string model;
  bool heldOut = false;
  double eagerMs = 0, measuredEagerMs = 0;  // simulated, measured median ("eager")
  double ddpMs = 0, measuredDdpMs = 0;      // simulated, measured median ("ddp-default")
};
struct HostProfileFitResult {
  sim::replay::HostFit fit;             // its profile carries the request's name and stands-for
  int fittedOn = 0;                     // models in the fit
  std::vector<HostProfileFitRow> rows;  // every model of the facts, in their order
};
StatusOr<HostProfileFitResult> runHostProfileFit(const HostProfileFitRequest& request);

// {"profile", "models": [{"model", "held_out", "eager_ms", "measured_eager_ms", "ddp_ms",
// "measured_ddp_ms"}], "notes"}.
nlohmann::json hostProfileFitJson(const HostProfileFitResult& result);

}  // namespace ddpscope::api
