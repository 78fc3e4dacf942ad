#include "ddp/ddp_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/strings.h"

namespace ddpscope::ddp {
namespace {

const char* boolName(bool value) {
  return value ? "true" : "false";
}

constexpr int64_t kMaxListMiB = int64_t{1} << 42;  // keeps MiB * 2^20 far below 2^63

bool isFloatDtype(models::DType dtype) {
  return dtype == models::DType::kFloat32 || dtype == models::DType::kFloat16 ||
         dtype == models::DType::kBFloat16 || dtype == models::DType::kFloat64;
}

}  // namespace

StatusOr<SemanticsProfile> parseSemanticsProfile(std::string_view name) {
  if (name == "2.15" || name == "current" || name == "2.4") return SemanticsProfile::kV2_15;
  if (name == "1.13") return SemanticsProfile::kV1_13;
  if (name == "1.5" || name == "legacy") return SemanticsProfile::kV1_5;
  return invalidArgument(
      "semantics profile: expected one of \"2.15\" (or \"current\"), \"1.13\", \"1.5\", got "
      "\"" +
      std::string(name) + "\"");
}

std::string_view semanticsProfileName(SemanticsProfile profile) {
  switch (profile) {
    case SemanticsProfile::kV1_5:
      return "1.5";
    case SemanticsProfile::kV1_13:
      return "1.13";
    case SemanticsProfile::kV2_15:
      return "2.15";
  }
  return "?";
}

StatusOr<CommHookKind> parseCommHookKind(std::string_view name) {
  if (name == "none") return CommHookKind::kNone;
  if (name == "allreduce") return CommHookKind::kAllreduce;
  if (name == "fp16") return CommHookKind::kFp16;
  if (name == "bf16") return CommHookKind::kBf16;
  if (name == "powersgd") return CommHookKind::kPowerSgd;
  return invalidArgument(
      "comm_hook: expected one of \"none\", \"allreduce\", \"fp16\", \"bf16\", \"powersgd\", got "
      "\"" +
      std::string(name) + "\"");
}

std::string_view commHookKindName(CommHookKind kind) {
  switch (kind) {
    case CommHookKind::kNone:
      return "none";
    case CommHookKind::kAllreduce:
      return "allreduce";
    case CommHookKind::kFp16:
      return "fp16";
    case CommHookKind::kBf16:
      return "bf16";
    case CommHookKind::kPowerSgd:
      return "powersgd";
  }
  return "?";
}

int64_t DdpConfig::bucketCapBytes() const {
  // distributed.py _BucketCapacityConfig: the list's maximum replaces bucket_cap_mb.
  if (!bucketCapMbList.empty()) {
    return *std::max_element(bucketCapMbList.begin(), bucketCapMbList.end()) * kBytesPerMiB;
  }
  // Python: int(bucket_cap_mb * 1024 * 1024); the product is a float, int() truncates.
  return static_cast<int64_t>(bucketCapMb * 1024.0 * 1024.0);
}

std::vector<int64_t> DdpConfig::bucketLimitsList() const {
  std::vector<int64_t> out;
  out.reserve(bucketCapMbList.size());
  for (int64_t mib : bucketCapMbList) out.push_back(mib * kBytesPerMiB);
  return out;
}

Status DdpConfig::validate() const {
  if (!std::isfinite(bucketCapMb) || bucketCapMb <= 0) {
    return invalidArgument("bucket_cap_mb: expected a positive number of MiB, got " +
                           formatShortest(bucketCapMb));
  }
  if (!fitsInt64Bytes(bucketCapMb)) {
    return invalidArgument("bucket_cap_mb: " + formatShortest(bucketCapMb) +
                           " MiB does not fit in a 64-bit byte count");
  }
  for (int64_t mib : bucketCapMbList) {
    if (mib <= 0 || mib > kMaxListMiB) {
      return invalidArgument("bucket_cap_mb_list: expected positive integers (MiB) up to " +
                             std::to_string(kMaxListMiB) + ", got " + std::to_string(mib));
    }
  }
  if (profile != SemanticsProfile::kV2_15) {
    const char* newer = !bucketCapMbList.empty()    ? "bucket_cap_mb_list"
                        : batchedGradCopy           ? "batched_grad_copy"
                        : skipAllReduceUnusedParams ? "skip_all_reduce_unused_params"
                        : lazyBucketAllocation      ? "lazy_bucket_allocation"
                        : mixedPrecision.enabled    ? "mixed_precision"
                                                    : nullptr;
    if (newer != nullptr) {
      return invalidArgument(std::string(newer) +
                             ": a PyTorch 2.15 argument, not available with semantics " +
                             std::string(semanticsProfileName(profile)) + " (use semantics 2.15)");
    }
  }
  if (mixedPrecision.enabled) {
    if (!isFloatDtype(mixedPrecision.paramDtype) || !isFloatDtype(mixedPrecision.reduceDtype)) {
      return invalidArgument(
          "mixed_precision: param_dtype and reduce_dtype must be floating point");
    }
    if (commHook.present()) {
      return invalidArgument(
          "mixed_precision: DDP registers its own communication hook for mixed precision; a "
          "comm_hook (" +
          std::string(commHookKindName(commHook.kind)) + ") cannot be combined with it");
    }
  }
  if (firstBucketBytes <= 0) {
    return invalidArgument("first_bucket_bytes: expected a positive number of bytes, got " +
                           std::to_string(firstBucketBytes));
  }
  if (noSyncPeriod < 1) {
    return invalidArgument(
        "no_sync_period: expected an integer >= 1 (1 = synchronize every step), got " +
        std::to_string(noSyncPeriod));
  }
  if (worldSize < 1) {
    return invalidArgument("world_size: expected an integer >= 1, got " +
                           std::to_string(worldSize));
  }
  if (commHook.kind == CommHookKind::kPowerSgd) {
    if (commHook.powerSgdRank < 1) {
      return invalidArgument("powersgd matrix_approximation_rank: expected an integer >= 1, got " +
                             std::to_string(commHook.powerSgdRank));
    }
    if (!std::isfinite(commHook.powerSgdMinCompressionRate) ||
        commHook.powerSgdMinCompressionRate <= 0) {
      return invalidArgument("powersgd min_compression_rate: expected a positive number, got " +
                             formatShortest(commHook.powerSgdMinCompressionRate));
    }
    if (commHook.powerSgdStartIter < 1) {
      return invalidArgument("powersgd start_powerSGD_iter: expected an integer >= 1, got " +
                             std::to_string(commHook.powerSgdStartIter));
    }
    // E18: buckets are rebuilt after iteration 1, so error feedback / warm start state built in
    // iteration 1 would be keyed by the wrong buckets.
    if (commHook.powerSgdStartIter <= 1 &&
        (commHook.powerSgdErrorFeedback || commHook.powerSgdWarmStart)) {
      return invalidArgument(
          "powersgd start_powerSGD_iter: expected > 1 when use_error_feedback or warm_start is "
          "enabled (buckets are rebuilt after iteration 1), got " +
          std::to_string(commHook.powerSgdStartIter));
    }
  }
  return Status::ok();
}

std::string DdpConfig::toString() const {
  std::ostringstream out;
  out << "bucket_cap_mb=" << formatShortest(bucketCapMb) << (bucketCapSetByUser ? "" : " (default)")
      << " first_bucket_bytes=" << firstBucketBytes
      << " find_unused_parameters=" << boolName(findUnusedParameters)
      << " static_graph=" << boolName(staticGraph)
      << " gradient_as_bucket_view=" << boolName(gradientAsBucketView)
      << " no_sync_period=" << noSyncPeriod << " comm_hook=" << commHookKindName(commHook.kind)
      << " world_size=" << worldSize << " broadcast_buffers=" << boolName(broadcastBuffers)
      << " semantics=" << semanticsProfileName(profile);
  if (!bucketCapMbList.empty()) {
    out << " bucket_cap_mb_list=[";
    for (size_t i = 0; i < bucketCapMbList.size(); ++i) out << (i ? "," : "") << bucketCapMbList[i];
    out << "]";
  }
  if (!initSyncBuffers) out << " init_sync_buffers=false";
  if (batchedGradCopy) out << " batched_grad_copy=true";
  if (skipAllReduceUnusedParams) out << " skip_all_reduce_unused_params=true";
  if (lazyBucketAllocation) out << " lazy_bucket_allocation=true";
  if (mixedPrecision.enabled) {
    out << " mixed_precision=" << models::dtypeName(mixedPrecision.paramDtype) << ":"
        << models::dtypeName(mixedPrecision.reduceDtype);
  }
  if (commHook.kind == CommHookKind::kPowerSgd) {
    out << " powersgd_rank=" << commHook.powerSgdRank
        << " start_powersgd_iter=" << commHook.powerSgdStartIter;
  }
  if (setLastBucketCap) out << " DDP_SET_LAST_BUCKET_CAP=1";
  return out.str();
}

}  // namespace ddpscope::ddp
