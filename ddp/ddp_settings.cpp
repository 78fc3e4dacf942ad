#include "ddp/ddp_settings.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "io/json_reader.h"

namespace ddpscope::ddp {
namespace {

using Json = nlohmann::json;

constexpr double kBytesPerMiB = static_cast<double>(DdpConfig::kBytesPerMiB);

StatusOr<models::DType> parseFloatDtype(std::string_view name) {
  if (name == "fp16" || name == "float16" || name == "half") return models::DType::kFloat16;
  if (name == "bf16" || name == "bfloat16") return models::DType::kBFloat16;
  if (name == "fp32" || name == "float32" || name == "float") return models::DType::kFloat32;
  return invalidArgument("");
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

Status validateDdpConfig(const DdpConfig& config) {
  return config.validate();
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

}  // namespace ddpscope::ddp
