#include "api/ddp_flags.h"

#include <string>

#include "base/strings.h"

namespace ddpscope::api {

using namespace ddpscope::ddp;  // the settings these flags set

namespace {

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
     "ready before its bias, which moves the rebuilt buckets' boundaries; with --dtype bf16/fp16 "
     "the memory-bound layers move the bytes of autocast's dtypes (fp32 norms and residuals) and "
     "each matrix product and convolution adds autocast's casts (fp32 weights and inputs)",
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

}  // namespace ddpscope::api
