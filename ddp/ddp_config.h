// DdpConfig: the DistributedDataParallel knobs that change what DDP does on the wire.
//
// Mirrors the constructor arguments of torch.nn.parallel.DistributedDataParallel that matter
// for gradient synchronization (bucket_cap_mb, the first-bucket size, find_unused_parameters,
// static_graph, gradient_as_bucket_view; PyTorch 2.15's bucket_cap_mb_list, batched_grad_copy,
// skip_all_reduce_unused_params, forward_sync_buffers, lazy_bucket_allocation and
// mixed_precision, docs/spec/ddp-semantics.md Appendix B), plus the training-loop choices that
// interact with them (a no_sync() period, a communication hook, the world size) and the PyTorch
// version whose semantics to follow (SemanticsProfile; docs/spec/ddp-semantics.md §1.3).
//
// Units: bucketCapMb is MiB (PyTorch multiplies by 1024*1024 despite the "MB" name);
// firstBucketBytes is bytes. A plain value type: copy freely. Flags, help, JSON keys and the
// one validation where settings enter live in ddp_settings.h.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"

namespace ddpscope::ddp {

// Which PyTorch release's DDP behaviour to reproduce where versions differ (§1.3 matrix).
enum class SemanticsProfile {
  kV1_5,   // "1.5": the PVLDB 2020 paper: [1 MiB, cap] everywhere, first bucket not tunable
  kV1_13,  // "1.13": ~1.12/1.13 to 2.3, checked against PyTorch 1.13.1
  kV2_15,  // "2.15": bucket_cap_mb=None logic (since ≈2.4) plus the 2.15 arguments, checked
           // against PyTorch 2.15.0 (tests/data/torch-2.15); the default
  kCurrent = kV2_15,  // "current" names the newest verified profile
};

// "1.5", "1.13", "2.15" (also accepts "legacy" for 1.5, and "current" and "2.4" for 2.15: with
// the arguments 2.4 had, 2.15 builds the same plans).
StatusOr<SemanticsProfile> parseSemanticsProfile(std::string_view name);
std::string_view semanticsProfileName(SemanticsProfile profile);

enum class CommHookKind {
  kNone,       // default: pre-divided copy into the bucket, SUM allreduce
  kAllreduce,  // built-in ALLREDUCE / allreduce_hook: divides inside the hook
  kFp16,       // fp16_compress_hook: cast to fp16, divide, allreduce 2 bytes/element
  kBf16,       // bf16_compress_hook: as fp16 with bfloat16
  kPowerSgd,   // powerSGD_hook: 3 sequential allreduces per bucket once compression starts
};

// "none", "allreduce", "fp16", "bf16", "powersgd".
StatusOr<CommHookKind> parseCommHookKind(std::string_view name);
std::string_view commHookKindName(CommHookKind kind);

struct CommHook {
  CommHookKind kind = CommHookKind::kNone;
  // PowerSGD only.
  int powerSgdRank = 1;              // matrix_approximation_rank
  int64_t powerSgdStartIter = 1000;  // start_powerSGD_iter: vanilla allreduce before it
  double powerSgdMinCompressionRate = 2.0;
  bool powerSgdErrorFeedback = true;  // use_error_feedback
  bool powerSgdWarmStart = true;      // warm_start

  // Any hook at all: the Reducer then copies gradients unscaled (the hook divides).
  bool present() const { return kind != CommHookKind::kNone; }
  bool operator==(const CommHook&) const = default;
};

// DDP's mixed_precision=_MixedPrecision(param_dtype, reduce_dtype): the reducer's buckets are
// allocated in param_dtype, its comm hook casts a bucket to reduce_dtype (when they differ),
// allreduces and divides it, then upcasts the gradients. Bucket assignment still uses the
// parameters' own (fp32) sizes. reduce_dtype unset = param_dtype.
struct MixedPrecision {
  bool enabled = false;
  models::DType paramDtype = models::DType::kFloat32;
  models::DType reduceDtype = models::DType::kFloat32;
  bool operator==(const MixedPrecision&) const = default;
};

struct DdpConfig {
  static constexpr double kDefaultBucketCapMb = 25.0;
  static constexpr int64_t kDefaultFirstBucketBytes = 1048576;  // dist._DEFAULT_FIRST_BUCKET_BYTES
  static constexpr int64_t kMaxBucketBytes = std::numeric_limits<int64_t>::max();  // sys.maxsize
  static constexpr int64_t kBroadcastBucketBytes = 250LL * 1024 * 1024;  // coalesced broadcasts
  static constexpr int64_t kBytesPerMiB = 1024 * 1024;  // bucket caps are MiB (see Units)
  // 2^43 MiB = 2^63 bytes: a size in MiB below it has an int64 byte count (NaN is not below).
  static constexpr double kMiBLimit = 8796093022208.0;
  static bool fitsInt64Bytes(double mib) { return mib < kMiBLimit; }

  // bucket_cap_mb in MiB. bucketCapSetByUser distinguishes "left at default" (None in current
  // PyTorch) from an explicit value, which changes the limits in the current profile.
  double bucketCapMb = kDefaultBucketCapMb;
  bool bucketCapSetByUser = false;
  // bucket_cap_mb_list (2.15), MiB each; empty = not given. When given it overrides
  // bucket_cap_mb: the effective cap is its maximum and the list gives per-bucket limits
  // (bucketLimitsList()).
  std::vector<int64_t> bucketCapMbList;
  int64_t firstBucketBytes = kDefaultFirstBucketBytes;
  bool findUnusedParameters = false;
  bool staticGraph = false;
  bool gradientAsBucketView = false;
  // Gradient accumulation with no_sync(): K = 1 syncs every step; K > 1 runs K-1 no_sync
  // steps then one synced step (1-based iteration i is synced iff i % K == 0).
  int64_t noSyncPeriod = 1;
  CommHook commHook;
  int worldSize = 1;
  // Buffer sync before each forward: broadcast_buffers (≤ 2.12) / forward_sync_buffers (2.13+).
  bool broadcastBuffers = true;
  // Whether construction's module-state sync includes buffers: false only with the deprecated
  // broadcast_buffers=False (forward_sync_buffers=False keeps it). ddpscope does not simulate
  // construction, so this changes no timing.
  bool initSyncBuffers = true;
  // batched_grad_copy (2.15): per-gradient copies into a bucket become one batched copy plus one
  // divide when the bucket is ready; the copy back after the allreduce is one batched copy per
  // bucket.
  bool batchedGradCopy = false;
  // skip_all_reduce_unused_params (2.15): a bucket whose parameters are all unused on the rank
  // launches no allreduce (mixed buckets are reduced in full; the used-map allreduce still runs).
  bool skipAllReduceUnusedParams = false;
  // lazy_bucket_allocation (2.15): bucket storage allocated at the bucket's first ready gradient
  // and released after backward: peak memory only, no change to the modelled schedule.
  bool lazyBucketAllocation = false;
  MixedPrecision mixedPrecision;
  // The forward runs under torch.autocast (bf16 / fp16 AMP). Not a DDP argument, but it changes
  // the rebuilt buckets: autocast casts each nn.Linear's weight and bias to the low precision, and
  // autograd then makes the weight's gradient ready before the bias's (the reverse of float32).
  // Measured with PyTorch 2.11 on an H100 and 2.15 on a CPU (tests/data/gpu/h100).
  bool autocast = false;
  // DDP_SET_LAST_BUCKET_CAP=1: rebuild in reversed ready order and reverse the result.
  bool setLastBucketCap = false;
  SemanticsProfile profile = SemanticsProfile::kCurrent;

  // Sets bucketCapMb and marks it as chosen by the user.
  void setBucketCapMb(double mib) {
    bucketCapMb = mib;
    bucketCapSetByUser = true;
  }
  // int(bucket_cap_mb * 1024 * 1024): truncation toward zero like Python's int(); with
  // bucket_cap_mb_list, int(max(list) * 1024 * 1024).
  int64_t bucketCapBytes() const;
  // bucket_cap_mb_list in bytes (empty when not given).
  std::vector<int64_t> bucketLimitsList() const;
  // An explicit cap (bucket_cap_mb or bucket_cap_mb_list given): no small first bucket in the
  // 2.15 profile.
  bool capGivenByUser() const { return bucketCapSetByUser || !bucketCapMbList.empty(); }
  // The Reducer copies gradients unscaled and the collective's hook divides: a comm hook, or
  // mixed precision (which registers its own hook).
  bool hookDivides() const { return commHook.present() || mixedPrecision.enabled; }
  // find_unused_parameters without static_graph: graph traversal + used-map allreduce each step.
  bool dynamicFindUnused() const { return findUnusedParameters && !staticGraph; }
  // Whether the backward of 1-based `iteration` synchronizes (not inside no_sync()).
  bool syncEnabled(int64_t iteration) const { return iteration % noSyncPeriod == 0; }
  // Errors name the field in PyTorch's spelling, e.g.
  // "bucket_cap_mb: expected a positive number of MiB, got -1".
  Status validate() const;
  // One line, e.g. "bucket_cap_mb=25 (default) first_bucket_bytes=1048576 find_unused=false ...".
  std::string toString() const;
  bool operator==(const DdpConfig&) const = default;
};

}  // namespace ddpscope::ddp
