#include "ddp/ddp_settings.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "io/json_reader.h"

namespace ddpscope::ddp {
namespace {

using Json = nlohmann::json;

constexpr double kBytesPerMiB = static_cast<double>(DdpConfig::kBytesPerMiB);

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
    {DdpSetting::kSemantics, "torch-version", "VERSION",
     "PyTorch DDP behaviour to follow: 2.15 (also 'current'), 1.13 or 1.5 (default 2.15)", true},
    {DdpSetting::kBucketCapMbList, "bucket-cap-mb-list", "L,...",
     "bucket_cap_mb_list: per-bucket caps in whole MiB (2.15; overrides --bucket-cap-mb, "
     "effective cap = max)",
     true},
    {DdpSetting::kBatchedGradCopy, "batched-grad-copy", "",
     "batched_grad_copy=True: one batched copy + one divide per bucket instead of per-gradient "
     "copies (2.15)",
     false},
    {DdpSetting::kSkipAllReduceUnused, "skip-all-reduce-unused-params", "",
     "skip_all_reduce_unused_params=True: no allreduce for buckets whose parameters are all "
     "unused (2.15)",
     false},
    {DdpSetting::kNoForwardSyncBuffers, "no-forward-sync-buffers", "",
     "forward_sync_buffers=False: no buffer broadcast before each forward; construction still "
     "syncs them (2.15)",
     false},
    {DdpSetting::kLazyBucketAllocation, "lazy-bucket-allocation", "",
     "lazy_bucket_allocation=True: memory only, no change to the simulated timing (2.15)", false},
    {DdpSetting::kMixedPrecision, "mixed-precision", "P[:R]",
     "mixed_precision: param_dtype P, reduce_dtype R (fp16, bf16, fp32; R defaults to P): "
     "buckets reduced in R (2.15)",
     false},
    {DdpSetting::kAutocast, "autocast", "",
     "the forward runs under torch.autocast (bf16/fp16 AMP): an nn.Linear's weight gradient is "
     "ready before its bias, which moves the rebuilt buckets' boundaries",
     true},
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

// "1,4,25" → {1, 4, 25}: positive whole MiB (PyTorch's list[int]).
StatusOr<std::vector<int64_t>> parseCapList(std::string_view text, const std::string& what) {
  std::vector<int64_t> out;
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == '[' && rest.back() == ']') {
    rest = rest.substr(1, rest.size() - 2);
  }
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view item = trimString(rest.substr(0, comma));
    auto value = parseInt64(item);
    if (!value || *value <= 0 || *value > (int64_t{1} << 42)) {
      return invalidArgument(what + ": expected a comma-separated list of positive whole MiB " +
                             "(e.g. 1,4,25), got '" + std::string(text) + "'");
    }
    out.push_back(*value);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

StatusOr<models::DType> parseFloatDtype(std::string_view name) {
  if (name == "fp16" || name == "float16" || name == "half") return models::DType::kFloat16;
  if (name == "bf16" || name == "bfloat16") return models::DType::kBFloat16;
  if (name == "fp32" || name == "float32" || name == "float") return models::DType::kFloat32;
  return invalidArgument("");
}

// "fp16", "bf16:fp32", "float16:float32" → MixedPrecision.
StatusOr<MixedPrecision> parseMixedPrecision(std::string_view text, const std::string& what) {
  const std::string error =
      what + ": expected P or P:R with P, R in fp16, bf16, fp32, got '" + std::string(text) + "'";
  MixedPrecision mp;
  mp.enabled = true;
  const size_t colon = text.find(':');
  auto param = parseFloatDtype(text.substr(0, colon));
  if (!param.isOk()) return invalidArgument(error);
  mp.paramDtype = *param;
  mp.reduceDtype = *param;
  if (colon != std::string_view::npos) {
    auto reduce = parseFloatDtype(text.substr(colon + 1));
    if (!reduce.isOk()) return invalidArgument(error);
    mp.reduceDtype = *reduce;
  }
  return mp;
}

std::string mixedPrecisionText(const MixedPrecision& mp) {
  if (!mp.enabled) return "none";
  return std::string(models::dtypeName(mp.paramDtype)) + ":" +
         std::string(models::dtypeName(mp.reduceDtype));
}

std::string capListText(const std::vector<int64_t>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) out += (i ? "," : "") + std::to_string(list[i]);
  return out;
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
      if (!DdpConfig::fitsInt64Bytes(mib)) {
        return invalidArgument(flagName(id) + ": " + std::string(text) +
                               " MiB does not fit in a 64-bit byte count");
      }
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
      // The deprecated broadcast_buffers=False: no forward sync and no buffers in the
      // construction sync (unless forward_sync_buffers is given too: it wins).
      config.broadcastBuffers = false;
      config.initSyncBuffers = false;
      return Status::ok();
    case DdpSetting::kNoForwardSyncBuffers:
      config.broadcastBuffers = false;
      config.initSyncBuffers = true;
      return Status::ok();
    case DdpSetting::kBucketCapMbList: {
      ASSIGN_OR_RETURN(config.bucketCapMbList, parseCapList(text, flagName(id)));
      return Status::ok();
    }
    case DdpSetting::kBatchedGradCopy:
      config.batchedGradCopy = true;
      return Status::ok();
    case DdpSetting::kSkipAllReduceUnused:
      config.skipAllReduceUnusedParams = true;
      return Status::ok();
    case DdpSetting::kLazyBucketAllocation:
      config.lazyBucketAllocation = true;
      return Status::ok();
    case DdpSetting::kMixedPrecision: {
      ASSIGN_OR_RETURN(config.mixedPrecision, parseMixedPrecision(text, flagName(id)));
      return Status::ok();
    }
    case DdpSetting::kAutocast:
      config.autocast = true;
      return Status::ok();
    case DdpSetting::kSemantics: {
      auto profile = parseSemanticsProfile(text);
      if (!profile.isOk()) {
        return invalidArgument(flagName(id) + ": expected 2.15 (or current), 1.13 or 1.5, got '" +
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

std::vector<std::pair<std::string, std::string>> ddpSettingValues(const DdpConfig& config) {
  const DdpConfig defaults;
  std::vector<std::pair<std::string, std::string>> out;
  auto option = [&](DdpSetting id, std::string value) {
    out.emplace_back(ddpSettingSpec(id).flag, std::move(value));
  };
  auto on = [&](DdpSetting id) { out.emplace_back(ddpSettingSpec(id).flag, ""); };
  if (config.bucketCapSetByUser || config.bucketCapMb != defaults.bucketCapMb) {
    option(DdpSetting::kBucketCapMb, formatShortest(config.bucketCapMb));
  }
  if (config.firstBucketBytes != defaults.firstBucketBytes) {
    // Exact: bytes / 2^20 is exact in binary, and the flag multiplies it back by 2^20.
    option(DdpSetting::kFirstBucketMb,
           formatShortest(static_cast<double>(config.firstBucketBytes) / kBytesPerMiB));
  }
  if (config.findUnusedParameters) on(DdpSetting::kFindUnused);
  if (config.staticGraph) on(DdpSetting::kStaticGraph);
  if (config.gradientAsBucketView) on(DdpSetting::kGradientAsBucketView);
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
  if (!config.broadcastBuffers) {
    on(config.initSyncBuffers ? DdpSetting::kNoForwardSyncBuffers
                              : DdpSetting::kNoBroadcastBuffers);
  }
  if (config.profile != defaults.profile) {
    option(DdpSetting::kSemantics, std::string(semanticsProfileName(config.profile)));
  }
  if (!config.bucketCapMbList.empty()) {
    option(DdpSetting::kBucketCapMbList, capListText(config.bucketCapMbList));
  }
  if (config.batchedGradCopy) on(DdpSetting::kBatchedGradCopy);
  if (config.skipAllReduceUnusedParams) on(DdpSetting::kSkipAllReduceUnused);
  if (config.lazyBucketAllocation) on(DdpSetting::kLazyBucketAllocation);
  if (config.mixedPrecision.enabled) {
    option(DdpSetting::kMixedPrecision, mixedPrecisionText(config.mixedPrecision));
  }
  if (config.autocast) on(DdpSetting::kAutocast);
  return out;
}

std::vector<std::string> ddpSettingsFlags(const DdpConfig& config) {
  std::vector<std::string> out;
  for (auto& [name, value] : ddpSettingValues(config)) {
    out.push_back("--" + name);
    if (!value.empty()) out.push_back(std::move(value));
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
         (config.initSyncBuffers || config.broadcastBuffers
              ? ", forward_sync_buffers=" + std::string(py(config.broadcastBuffers))
              : std::string(", broadcast_buffers=False"));
  if (!config.bucketCapMbList.empty()) {
    out += ", bucket_cap_mb_list=[" + capListText(config.bucketCapMbList) + "]";
  }
  if (config.batchedGradCopy) out += ", batched_grad_copy=True";
  if (config.skipAllReduceUnusedParams) out += ", skip_all_reduce_unused_params=True";
  if (config.lazyBucketAllocation) out += ", lazy_bucket_allocation=True";
  if (config.mixedPrecision.enabled) {
    out += ", mixed_precision=(param " +
           std::string(models::dtypeName(config.mixedPrecision.paramDtype)) + ", reduce " +
           std::string(models::dtypeName(config.mixedPrecision.reduceDtype)) + ")";
  }
  out += "); first bucket " + formatBytes(config.firstBucketBytes) + "; ";
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
  if (config.autocast) out += "; forward under torch.autocast";
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
      {"init_sync_buffers", config.initSyncBuffers},
      {"bucket_cap_mb_list", config.bucketCapMbList},
      {"batched_grad_copy", config.batchedGradCopy},
      {"skip_all_reduce_unused_params", config.skipAllReduceUnusedParams},
      {"lazy_bucket_allocation", config.lazyBucketAllocation},
      {"mixed_precision", mixedPrecisionText(config.mixedPrecision)},
  };
  // Only when set: outputs (and trace hashes) of runs without it stay as they were.
  if (config.autocast) out["autocast"] = true;
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
                                             "set_last_bucket_cap",
                                             "forward_sync_buffers",
                                             "init_sync_buffers",
                                             "bucket_cap_mb_list",
                                             "batched_grad_copy",
                                             "skip_all_reduce_unused_params",
                                             "lazy_bucket_allocation",
                                             "mixed_precision",
                                             "autocast"};
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
    ASSIGN_OR_RETURN(
        const double mib,
        in.number(object, "", "first_bucket_mb", 0, std::nextafter(DdpConfig::kMiBLimit, 0.0),
                  std::nullopt, "a positive number (MiB) below 2^43"));
    c.firstBucketBytes = static_cast<int64_t>(mib * kBytesPerMiB);
  }
  const std::pair<const char*, bool*> flags[] = {
      {"find_unused_parameters", &c.findUnusedParameters},
      {"find_unused", &c.findUnusedParameters},  // legacy
      {"static_graph", &c.staticGraph},
      {"gradient_as_bucket_view", &c.gradientAsBucketView},
      {"set_last_bucket_cap", &c.setLastBucketCap},
      {"batched_grad_copy", &c.batchedGradCopy},
      {"skip_all_reduce_unused_params", &c.skipAllReduceUnusedParams},
      {"lazy_bucket_allocation", &c.lazyBucketAllocation},
      {"autocast", &c.autocast},
  };
  for (const auto& [key, target] : flags) {
    ASSIGN_OR_RETURN(std::optional<bool> value, readBool(object, origin, key));
    if (value) *target = *value;
  }
  // Buffer sync: broadcast_buffers (or 2.15's forward_sync_buffers) is the per-forward sync;
  // without init_sync_buffers (files written before it existed) construction follows it, as
  // the deprecated broadcast_buffers argument did.
  for (const char* key : {"broadcast_buffers", "forward_sync_buffers"}) {
    ASSIGN_OR_RETURN(std::optional<bool> value, readBool(object, origin, key));
    if (value) {
      c.broadcastBuffers = *value;
      c.initSyncBuffers = *value;
      break;
    }
  }
  ASSIGN_OR_RETURN(std::optional<bool> initSync, readBool(object, origin, "init_sync_buffers"));
  if (initSync) c.initSyncBuffers = *initSync;
  if (const Json* list = findJsonMember(object, "bucket_cap_mb_list")) {
    const char* expected = "an array of positive integers (MiB)";
    if (list->is_array()) {
      c.bucketCapMbList.clear();
      for (const Json& item : *list) {
        if (!item.is_number_integer() || item.get<int64_t>() <= 0) {
          return in.error("bucket_cap_mb_list", expected, list);
        }
        c.bucketCapMbList.push_back(item.get<int64_t>());
      }
    } else if (list->is_string()) {  // trace metadata: the array's JSON text
      const std::string text = list->get<std::string>();
      if (text == "[]" || text.empty()) {
        c.bucketCapMbList.clear();
      } else {
        auto parsed = parseCapList(text, "bucket_cap_mb_list");
        if (!parsed.isOk()) return in.error("bucket_cap_mb_list", expected, list);
        c.bucketCapMbList = *parsed;
      }
    } else {
      return in.error("bucket_cap_mb_list", expected, list);
    }
  }
  if (const Json* mp = findJsonMember(object, "mixed_precision")) {
    const char* expected = "\"none\" or \"PARAM:REDUCE\" (float16, bfloat16, float32)";
    if (!mp->is_string()) return in.error("mixed_precision", expected, mp);
    const std::string text = mp->get<std::string>();
    if (text == "none") {
      c.mixedPrecision = MixedPrecision();
    } else {
      auto parsed = parseMixedPrecision(text, "mixed_precision");
      if (!parsed.isOk()) return in.error("mixed_precision", expected, mp);
      c.mixedPrecision = *parsed;
    }
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
    if (!profile.isOk()) {
      return in.error("semantics", "one of 2.15 (or current), 1.13, 1.5", semantics);
    }
    c.profile = *profile;
  }
  if (Status status = validateDdpConfig(c); !status.isOk()) {
    return invalidArgument(origin + ": " + status.message());
  }
  return c;
}

std::vector<SettingSpec> ddpSettingList(DdpSettingSet settings) {
  std::vector<SettingSpec> out;
  for (const DdpSettingSpec& spec : ddpSettingSpecs()) {
    if (!settings.contains(spec.id)) continue;
    out.push_back({std::string(spec.flag), std::string(spec.valueName), std::string(spec.help)});
  }
  return out;
}

StatusOr<DdpConfig> parseDdpSettings(const SettingValues& values, DdpSettingSet settings,
                                     DdpConfig base) {
  for (const DdpSettingSpec& spec : ddpSettingSpecs()) {
    if (!settings.contains(spec.id)) continue;
    if (auto text = values.value(std::string(spec.flag))) {
      RETURN_IF_ERROR(applyDdpSetting(spec.id, *text, base));
    }
  }
  RETURN_IF_ERROR(validateDdpConfig(base));
  return base;
}

bool anyDdpSetting(const SettingValues& values, DdpSettingSet settings) {
  for (const DdpSettingSpec& spec : ddpSettingSpecs()) {
    if (settings.contains(spec.id) && values.has(std::string(spec.flag))) return true;
  }
  return false;
}

}  // namespace ddpscope::ddp
