#include "ddp/ddp_settings.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "io/json_reader.h"

namespace ddpscope::ddp {
namespace {

using Json = nlohmann::json;

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

constexpr DdpSettingSpec kSpecs[] = {
    {DdpSetting::kBucketCapMb, "bucket-cap-mb", "X",
     "bucket_cap_mb in MiB (default 25; giving it counts as 'set by the user')", true},
    {DdpSetting::kFirstBucketMb, "first-bucket-mb", "Y",
     "first bucket cap in MiB (default 1 = 1,048,576 B)", true},
    {DdpSetting::kFindUnused, "find-unused", "", "find_unused_parameters=True", true},
    {DdpSetting::kStaticGraph, "static-graph", "", "static_graph=True", true},
    {DdpSetting::kGradientAsBucketView, "gradient-as-bucket-view", "",
     "gradient_as_bucket_view=True (gradients are views of the buckets: no copies)", false},
    {DdpSetting::kNoSyncSteps, "no-sync-steps", "K",
     "gradient accumulation: K-1 no_sync() steps, then one synced (default 1)", false},
    {DdpSetting::kCommHook, "comm-hook", "HOOK",
     "communication hook: fp16 | bf16 | powersgd:R | allreduce | none (default none)", false},
    {DdpSetting::kNoBroadcastBuffers, "no-broadcast-buffers", "",
     "broadcast_buffers=False (no buffer broadcast before each forward)", false},
    {DdpSetting::kSemantics, "semantics", "PROFILE",
     "PyTorch behaviour profile: 1.5, 1.13 or current (default current)", true},
};

std::string flagName(DdpSetting id) {
  return "--" + std::string(ddpSettingSpec(id).flag);
}

StatusOr<double> positiveNumber(DdpSetting id, std::string_view text) {
  auto value = parseDouble(text);
  if (!value || !(*value > 0)) {
    return invalidArgument(flagName(id) + ": expected a positive number, got '" +
                           std::string(text) + "'");
  }
  return *value;
}

StatusOr<int64_t> positiveInteger(DdpSetting id, std::string_view text) {
  auto value = parseInt64(text);
  if (!value || *value <= 0) {
    return invalidArgument(flagName(id) + ": expected a positive integer, got '" +
                           std::string(text) + "'");
  }
  return *value;
}

// "fp16", "bf16", "powersgd:4", "none", "allreduce" → CommHook (PowerSGD's other fields keep
// their defaults).
StatusOr<CommHook> parseCommHookText(std::string_view text) {
  const std::string flag = flagName(DdpSetting::kCommHook);
  CommHook hook;
  std::string_view kind = text;
  std::optional<std::string_view> rank;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    kind = text.substr(0, colon);
    rank = text.substr(colon + 1);
  }
  auto parsed = parseCommHookKind(kind);
  if (!parsed.isOk()) {
    return invalidArgument(flag + ": expected fp16, bf16, powersgd:R, allreduce or none, got '" +
                           std::string(text) + "'");
  }
  hook.kind = *parsed;
  if (rank) {
    auto r = parseInt64(*rank);
    if (hook.kind != CommHookKind::kPowerSgd || !r || *r <= 0 || *r > 4096) {
      return invalidArgument(flag + ": expected powersgd:R with a positive rank R, got '" +
                             std::string(text) + "'");
    }
    hook.powerSgdRank = static_cast<int>(*r);
  }
  return hook;
}

// A boolean key: JSON true/false, or 0/1 as trace metadata stores it.
StatusOr<std::optional<bool>> readBool(const Json& object, const std::string& origin,
                                       std::string_view key) {
  const Json* value = findJsonMember(object, key);
  if (value == nullptr) return std::optional<bool>();
  if (value->is_boolean()) return std::optional<bool>(value->get<bool>());
  if (value->is_number_integer() && (value->get<int64_t>() == 0 || value->get<int64_t>() == 1)) {
    return std::optional<bool>(value->get<int64_t>() == 1);
  }
  return jsonFieldError(origin, std::string(key), "true or false (or 1 / 0)", value);
}

}  // namespace

std::span<const DdpSettingSpec> ddpSettingSpecs() {
  return kSpecs;
}

const DdpSettingSpec& ddpSettingSpec(DdpSetting id) {
  for (const DdpSettingSpec& spec : kSpecs) {
    if (spec.id == id) return spec;
  }
  return kSpecs[0];  // unreachable: every enumerator has a row
}

DdpSettingSet DdpSettingSet::all() {
  uint32_t bits = 0;
  for (const DdpSettingSpec& spec : kSpecs) bits |= 1u << static_cast<unsigned>(spec.id);
  return DdpSettingSet(bits);
}

DdpSettingSet DdpSettingSet::bucketPlan() {
  uint32_t bits = 0;
  for (const DdpSettingSpec& spec : kSpecs) {
    if (spec.changesBucketPlan) bits |= 1u << static_cast<unsigned>(spec.id);
  }
  return DdpSettingSet(bits);
}

DdpSettingSet DdpSettingSet::without(DdpSetting id) const {
  return DdpSettingSet(m_bits & ~(1u << static_cast<unsigned>(id)));
}

Status applyDdpSetting(DdpSetting id, std::string_view text, DdpConfig& config) {
  switch (id) {
    case DdpSetting::kBucketCapMb: {
      ASSIGN_OR_RETURN(double mib, positiveNumber(id, text));
      config.setBucketCapMb(mib);
      return Status::ok();
    }
    case DdpSetting::kFirstBucketMb: {
      ASSIGN_OR_RETURN(double mib, positiveNumber(id, text));
      const auto bytes = static_cast<int64_t>(mib * kBytesPerMiB);
      if (bytes <= 0) {
        return invalidArgument(flagName(id) + ": expected at least one byte, got '" +
                               std::string(text) + "'");
      }
      config.firstBucketBytes = bytes;
      return Status::ok();
    }
    case DdpSetting::kFindUnused:
      config.findUnusedParameters = true;
      return Status::ok();
    case DdpSetting::kStaticGraph:
      config.staticGraph = true;
      return Status::ok();
    case DdpSetting::kGradientAsBucketView:
      config.gradientAsBucketView = true;
      return Status::ok();
    case DdpSetting::kNoSyncSteps: {
      ASSIGN_OR_RETURN(config.noSyncPeriod, positiveInteger(id, text));
      return Status::ok();
    }
    case DdpSetting::kCommHook: {
      ASSIGN_OR_RETURN(config.commHook, parseCommHookText(text));
      return Status::ok();
    }
    case DdpSetting::kNoBroadcastBuffers:
      config.broadcastBuffers = false;
      return Status::ok();
    case DdpSetting::kSemantics: {
      auto profile = parseSemanticsProfile(text);
      if (!profile.isOk()) {
        return invalidArgument(flagName(id) + ": expected 1.5, 1.13 or current, got '" +
                               std::string(text) + "'");
      }
      config.profile = *profile;
      return Status::ok();
    }
  }
  return internalError("unknown DDP setting");
}

Status validateDdpConfig(const DdpConfig& config) {
  return config.validate();
}

std::vector<std::string> ddpSettingsFlags(const DdpConfig& config) {
  const DdpConfig defaults;
  std::vector<std::string> out;
  auto option = [&](DdpSetting id, std::string value) {
    out.push_back(flagName(id));
    out.push_back(std::move(value));
  };
  if (config.bucketCapSetByUser || config.bucketCapMb != defaults.bucketCapMb) {
    option(DdpSetting::kBucketCapMb, formatShortest(config.bucketCapMb));
  }
  if (config.firstBucketBytes != defaults.firstBucketBytes) {
    // Exact: bytes / 2^20 is exact in binary, and the flag multiplies it back by 2^20.
    option(DdpSetting::kFirstBucketMb,
           formatShortest(static_cast<double>(config.firstBucketBytes) / kBytesPerMiB));
  }
  if (config.findUnusedParameters) out.push_back(flagName(DdpSetting::kFindUnused));
  if (config.staticGraph) out.push_back(flagName(DdpSetting::kStaticGraph));
  if (config.gradientAsBucketView) out.push_back(flagName(DdpSetting::kGradientAsBucketView));
  if (config.noSyncPeriod != defaults.noSyncPeriod) {
    option(DdpSetting::kNoSyncSteps, std::to_string(config.noSyncPeriod));
  }
  if (config.commHook.kind != CommHookKind::kNone) {
    std::string hook(commHookKindName(config.commHook.kind));
    if (config.commHook.kind == CommHookKind::kPowerSgd) {
      hook += ":" + std::to_string(config.commHook.powerSgdRank);
    }
    option(DdpSetting::kCommHook, hook);
  }
  if (!config.broadcastBuffers) out.push_back(flagName(DdpSetting::kNoBroadcastBuffers));
  if (config.profile != defaults.profile) {
    option(DdpSetting::kSemantics, std::string(semanticsProfileName(config.profile)));
  }
  return out;
}

std::string ddpSettingsText(const DdpConfig& config) {
  auto py = [](bool value) { return value ? "True" : "False"; };
  std::string out = "DDP(bucket_cap_mb=";
  out += config.bucketCapSetByUser ? formatShortest(config.bucketCapMb)
                                   : "None (" + formatShortest(config.bucketCapMb) + " MiB)";
  out += std::string(", find_unused_parameters=") + py(config.findUnusedParameters) +
         ", static_graph=" + py(config.staticGraph) +
         ", gradient_as_bucket_view=" + py(config.gradientAsBucketView) +
         ", broadcast_buffers=" + py(config.broadcastBuffers) + "); first bucket " +
         formatBytes(config.firstBucketBytes) + "; ";
  out += config.noSyncPeriod > 1 ? "no_sync() for " + std::to_string(config.noSyncPeriod - 1) +
                                       " of every " + std::to_string(config.noSyncPeriod) + " steps"
                                 : std::string("every step synchronized");
  out += "; comm hook ";
  out += config.commHook.present() ? std::string(commHookKindName(config.commHook.kind)) : "none";
  if (config.commHook.kind == CommHookKind::kPowerSgd) {
    out += " (rank " + std::to_string(config.commHook.powerSgdRank) + ", from iteration " +
           std::to_string(config.commHook.powerSgdStartIter) + ")";
  }
  out += "; PyTorch semantics " + std::string(semanticsProfileName(config.profile));
  if (config.setLastBucketCap) out += "; DDP_SET_LAST_BUCKET_CAP=1";
  return out;
}

nlohmann::json ddpSettingsJson(const DdpConfig& config) {
  Json out = {
      {"bucket_cap_mb", config.bucketCapMb},
      {"bucket_cap_set_by_user", config.bucketCapSetByUser},
      {"first_bucket_bytes", config.firstBucketBytes},
      {"find_unused_parameters", config.findUnusedParameters},
      {"static_graph", config.staticGraph},
      {"gradient_as_bucket_view", config.gradientAsBucketView},
      {"no_sync_steps", config.noSyncPeriod},
      {"comm_hook", std::string(commHookKindName(config.commHook.kind))},
      {"broadcast_buffers", config.broadcastBuffers},
      {"semantics", std::string(semanticsProfileName(config.profile))},
      {"set_last_bucket_cap", config.setLastBucketCap},
  };
  if (config.commHook.kind == CommHookKind::kPowerSgd) {
    out["powersgd_rank"] = config.commHook.powerSgdRank;
    out["powersgd_start_iter"] = config.commHook.powerSgdStartIter;
    out["powersgd_min_compression_rate"] = config.commHook.powerSgdMinCompressionRate;
    out["powersgd_error_feedback"] = config.commHook.powerSgdErrorFeedback;
    out["powersgd_warm_start"] = config.commHook.powerSgdWarmStart;
  }
  return out;
}

namespace {
constexpr std::string_view kSettingKeys[] = {"bucket_cap_mb",
                                             "bucket_cap_set_by_user",
                                             "first_bucket_bytes",
                                             "first_bucket_mb",
                                             "find_unused_parameters",
                                             "find_unused",
                                             "static_graph",
                                             "gradient_as_bucket_view",
                                             "no_sync_steps",
                                             "no_sync",
                                             "comm_hook",
                                             "broadcast_buffers",
                                             "semantics",
                                             "set_last_bucket_cap"};
}  // namespace

bool containsDdpSettings(const nlohmann::json& object) {
  if (!object.is_object()) return false;
  for (std::string_view key : kSettingKeys) {
    if (findJsonMember(object, key) != nullptr) return true;
  }
  return false;
}

StatusOr<DdpConfig> readDdpSettingsJson(const nlohmann::json& object, const std::string& origin,
                                        const DdpConfig& base) {
  if (!object.is_object()) return jsonFieldError(origin, "(settings)", "a JSON object", &object);
  const io::JsonReader in(origin);
  constexpr double kInf = INFINITY;
  DdpConfig c = base;
  if (const Json* cap = findJsonMember(object, "bucket_cap_mb")) {
    ASSIGN_OR_RETURN(const double mib, in.number(object, "", "bucket_cap_mb", 0, kInf, std::nullopt,
                                                 "a positive number (MiB)"));
    if (!(mib > 0)) return in.error("bucket_cap_mb", "a positive number (MiB)", cap);
    // A run recorded before bucket_cap_set_by_user existed: 25 (the default) counts as not
    // given, any other value as given (in the current profile an explicit cap changes limits).
    ASSIGN_OR_RETURN(std::optional<bool> byUser,
                     readBool(object, origin, "bucket_cap_set_by_user"));
    c.bucketCapMb = mib;
    c.bucketCapSetByUser = byUser.value_or(mib != DdpConfig::kDefaultBucketCapMb);
  }
  if (findJsonMember(object, "first_bucket_bytes") != nullptr) {
    ASSIGN_OR_RETURN(c.firstBucketBytes, in.integer(object, "", "first_bucket_bytes", 1, INT64_MAX,
                                                    std::nullopt, "a positive integer (bytes)"));
  } else if (findJsonMember(object, "first_bucket_mb") != nullptr) {  // legacy
    ASSIGN_OR_RETURN(const double mib, in.number(object, "", "first_bucket_mb", 0, kInf,
                                                 std::nullopt, "a positive number (MiB)"));
    c.firstBucketBytes = static_cast<int64_t>(mib * kBytesPerMiB);
  }
  const std::pair<const char*, bool*> flags[] = {
      {"find_unused_parameters", &c.findUnusedParameters},
      {"find_unused", &c.findUnusedParameters},  // legacy
      {"static_graph", &c.staticGraph},
      {"gradient_as_bucket_view", &c.gradientAsBucketView},
      {"broadcast_buffers", &c.broadcastBuffers},
      {"set_last_bucket_cap", &c.setLastBucketCap},
  };
  for (const auto& [key, target] : flags) {
    ASSIGN_OR_RETURN(std::optional<bool> value, readBool(object, origin, key));
    if (value) *target = *value;
  }
  for (const char* key : {"no_sync_steps", "no_sync"}) {  // no_sync: legacy
    if (findJsonMember(object, key) != nullptr) {
      ASSIGN_OR_RETURN(c.noSyncPeriod, in.integer(object, "", key, 1, INT64_MAX, std::nullopt,
                                                  "an integer >= 1 (1 = synchronize every step)"));
      break;
    }
  }
  if (const Json* hook = findJsonMember(object, "comm_hook")) {
    auto kind = hook->is_string() ? parseCommHookKind(hook->get<std::string>())
                                  : StatusOr<CommHookKind>(invalidArgument(""));
    if (!kind.isOk()) {
      return in.error("comm_hook", "one of none, allreduce, fp16, bf16, powersgd", hook);
    }
    c.commHook = CommHook();
    c.commHook.kind = *kind;
  }
  if (c.commHook.kind == CommHookKind::kPowerSgd) {
    CommHook& h = c.commHook;
    ASSIGN_OR_RETURN(const int64_t rank, in.integer(object, "", "powersgd_rank", 1, 4096,
                                                    h.powerSgdRank, "an integer in [1, 4096]"));
    h.powerSgdRank = static_cast<int>(rank);
    ASSIGN_OR_RETURN(h.powerSgdStartIter,
                     in.integer(object, "", "powersgd_start_iter", 1, INT64_MAX,
                                h.powerSgdStartIter, "an integer >= 1"));
    ASSIGN_OR_RETURN(h.powerSgdMinCompressionRate,
                     in.number(object, "", "powersgd_min_compression_rate", 0, kInf,
                               h.powerSgdMinCompressionRate, "a positive number"));
    ASSIGN_OR_RETURN(std::optional<bool> feedback,
                     readBool(object, origin, "powersgd_error_feedback"));
    if (feedback) h.powerSgdErrorFeedback = *feedback;
    ASSIGN_OR_RETURN(std::optional<bool> warm, readBool(object, origin, "powersgd_warm_start"));
    if (warm) h.powerSgdWarmStart = *warm;
  }
  if (const Json* semantics = findJsonMember(object, "semantics")) {
    auto profile = semantics->is_string() ? parseSemanticsProfile(semantics->get<std::string>())
                                          : StatusOr<SemanticsProfile>(invalidArgument(""));
    if (!profile.isOk()) return in.error("semantics", "one of 1.5, 1.13, current", semantics);
    c.profile = *profile;
  }
  if (Status status = validateDdpConfig(c); !status.isOk()) {
    return invalidArgument(origin + ": " + status.message());
  }
  return c;
}

}  // namespace ddpscope::ddp
