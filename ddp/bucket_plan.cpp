#include "ddp/bucket_plan.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ddpscope::ddp {
namespace {

constexpr int kNumDTypes = static_cast<int>(models::DType::kBool) + 1;
constexpr int64_t kLegacyFirstBucketBytes = DdpConfig::kDefaultFirstBucketBytes;

std::string rangeText(int numParams) {
  return "[0, " + std::to_string(numParams) + ")";
}

// One bucket under construction: index list and byte count for one dtype.
struct Accumulator {
  std::vector<int> params;
  int64_t bytes = 0;
  int64_t sizeLimit = 0;
};

struct RawBucket {
  std::vector<int> params;
  int64_t sizeLimit = 0;
};

// Fills offsets/numel/bytes/dtype/sparse/index and the location table from index lists that
// are already known to be valid.
BucketPlan buildPlan(std::span<const models::ParamSpec> params, std::vector<RawBucket> raw) {
  BucketPlan plan;
  plan.buckets.resize(raw.size());
  plan.locations.assign(params.size(), ParamLocation{});
  for (size_t b = 0; b < raw.size(); ++b) {
    Bucket& bucket = plan.buckets[b];
    bucket.index = static_cast<int>(b);
    bucket.params = std::move(raw[b].params);
    bucket.sizeLimit = raw[b].sizeLimit;
    bucket.offsets.reserve(bucket.params.size());
    const models::ParamSpec& first = params[static_cast<size_t>(bucket.params.front())];
    bucket.dtype = first.dtype;
    bucket.sparse = first.sparseGrad;
    for (size_t slot = 0; slot < bucket.params.size(); ++slot) {
      const int p = bucket.params[slot];
      const models::ParamSpec& param = params[static_cast<size_t>(p)];
      bucket.offsets.push_back(bucket.numel);
      const int64_t numel = param.numel();
      bucket.numel += numel;
      bucket.bytes += numel * models::dtypeBytes(param.dtype);
      plan.locations[static_cast<size_t>(p)] = {bucket.index, static_cast<int>(slot)};
    }
  }
  return plan;
}

Status noParamsError() {
  return invalidArgument(
      "model has no trainable parameters: DistributedDataParallel is not needed when a module "
      "has no parameter that requires a gradient");
}

}  // namespace

int64_t BucketPlan::totalBytes() const {
  int64_t total = 0;
  for (const Bucket& bucket : buckets) total += bucket.bytes;
  return total;
}

const ParamLocation& BucketPlan::locate(int paramIndex) const {
  DDPSCOPE_CHECK_MSG(paramIndex >= 0 && paramIndex < numParams(), "parameter index out of range");
  return locations[static_cast<size_t>(paramIndex)];
}

std::vector<std::vector<int>> BucketPlan::indexLists() const {
  std::vector<std::vector<int>> lists;
  lists.reserve(buckets.size());
  for (const Bucket& bucket : buckets) lists.push_back(bucket.params);
  return lists;
}

std::vector<int64_t> BucketPlan::bucketBytes() const {
  std::vector<int64_t> bytes;
  bytes.reserve(buckets.size());
  for (const Bucket& bucket : buckets) bytes.push_back(bucket.bytes);
  return bytes;
}

std::vector<int64_t> BucketPlan::sizeLimits() const {
  std::vector<int64_t> limits;
  limits.reserve(buckets.size());
  for (const Bucket& bucket : buckets) limits.push_back(bucket.sizeLimit);
  return limits;
}

BucketPlan BucketPlan::reversed() const {
  BucketPlan out;
  out.buckets.assign(buckets.rbegin(), buckets.rend());
  out.locations = locations;
  const int n = numBuckets();
  for (int b = 0; b < n; ++b) out.buckets[static_cast<size_t>(b)].index = b;
  for (ParamLocation& location : out.locations) {
    if (location.bucket >= 0) location.bucket = n - 1 - location.bucket;
  }
  return out;
}

std::string BucketPlan::toString() const {
  std::ostringstream out;
  out << "[";
  for (const Bucket& bucket : buckets) {
    if (bucket.index > 0) out << ", ";
    out << "[";
    for (size_t k = 0; k < bucket.params.size(); ++k) out << (k ? ", " : "") << bucket.params[k];
    out << "] " << bucket.bytes << " B limit " << bucket.sizeLimit;
    if (bucket.sparse) out << " sparse";
  }
  out << "]";
  return out.str();
}

RebuildSync rebuildSyncSizes(const BucketPlan& plan) {
  return {static_cast<int64_t>(plan.numParams()) + 1, static_cast<int64_t>(plan.numBuckets())};
}

StatusOr<BucketPlan> makeBucketPlan(std::span<const models::ParamSpec> params,
                                    const std::vector<std::vector<int>>& indexLists,
                                    const std::vector<int64_t>& sizeLimits) {
  if (params.empty()) return noParamsError();
  if (indexLists.size() != sizeLimits.size()) {
    return invalidArgument("bucket plan: " + std::to_string(indexLists.size()) + " buckets but " +
                           std::to_string(sizeLimits.size()) + " size limits");
  }
  const int numParams = static_cast<int>(params.size());
  std::vector<int> owner(params.size(), -1);
  std::vector<RawBucket> raw;
  raw.reserve(indexLists.size());
  for (size_t b = 0; b < indexLists.size(); ++b) {
    const std::string where = "bucket " + std::to_string(b) + ": ";
    const std::vector<int>& list = indexLists[b];
    if (list.empty()) return invalidArgument(where + "empty bucket specified");
    if (sizeLimits[b] < 0) {
      return invalidArgument(where + "size limit must be >= 0, got " +
                             std::to_string(sizeLimits[b]));
    }
    for (int p : list) {
      if (p < 0 || p >= numParams) {
        return invalidArgument(where + "parameter index " + std::to_string(p) + " out of range " +
                               rangeText(numParams));
      }
      if (owner[static_cast<size_t>(p)] >= 0) {
        return invalidArgument(where + "parameter " + std::to_string(p) + " is already in bucket " +
                               std::to_string(owner[static_cast<size_t>(p)]));
      }
      owner[static_cast<size_t>(p)] = static_cast<int>(b);
      const models::ParamSpec& param = params[static_cast<size_t>(p)];
      if (param.sparseGrad && list.size() > 1) {
        return invalidArgument(where +
                               "buckets with more than one parameter cannot include parameters "
                               "that expect a sparse gradient (parameter " +
                               std::to_string(p) + " '" + param.name + "')");
      }
      const models::DType first = params[static_cast<size_t>(list.front())].dtype;
      if (param.dtype != first) {
        return invalidArgument(where +
                               "all parameters in a bucket must have the same dtype: "
                               "parameter " +
                               std::to_string(p) + " '" + param.name + "' is " +
                               std::string(models::dtypeName(param.dtype)) + ", the bucket is " +
                               std::string(models::dtypeName(first)));
      }
    }
    raw.push_back({list, sizeLimits[b]});
  }
  for (int p = 0; p < numParams; ++p) {
    if (owner[static_cast<size_t>(p)] < 0) {
      return invalidArgument("bucket plan: parameter " + std::to_string(p) + " '" +
                             params[static_cast<size_t>(p)].name + "' is in no bucket");
    }
  }
  return buildPlan(params, std::move(raw));
}

Status validateReadyOrder(std::span<const int> order, int numParams) {
  std::vector<char> seen(static_cast<size_t>(std::max(numParams, 0)), 0);
  for (int p : order) {
    if (p < 0 || p >= numParams) {
      return invalidArgument("ready order: index " + std::to_string(p) + " out of range " +
                             rangeText(numParams));
    }
    if (seen[static_cast<size_t>(p)]) {
      return invalidArgument("ready order: parameter " + std::to_string(p) + " appears twice");
    }
    seen[static_cast<size_t>(p)] = 1;
  }
  for (int p = 0; p < numParams; ++p) {
    if (!seen[static_cast<size_t>(p)]) {
      return invalidArgument("ready order: parameter " + std::to_string(p) + " is missing");
    }
  }
  return Status::ok();
}

StatusOr<BucketPlan> computeBucketAssignment(std::span<const models::ParamSpec> params,
                                             std::span<const int64_t> limits,
                                             std::span<const int> tensorIndices) {
  if (params.empty()) return noParamsError();
  if (limits.empty()) return invalidArgument("bucket size limits: expected at least one limit");
  for (int64_t limit : limits) {
    if (limit < 0) {
      return invalidArgument("bucket size limits: expected non-negative byte counts, got " +
                             std::to_string(limit));
    }
  }
  const bool rebuild = !tensorIndices.empty();
  const int numParams = static_cast<int>(params.size());
  if (rebuild) RETURN_IF_ERROR(validateReadyOrder(tensorIndices, numParams));

  std::array<Accumulator, kNumDTypes> accumulators;
  std::array<size_t, kNumDTypes> cursor{};  // index into limits, per dtype
  std::array<bool, kNumDTypes> seen{};
  std::vector<int> firstSeenOrder;  // dtype keys in the order first met
  std::vector<RawBucket> out;

  for (int i = 0; i < numParams; ++i) {
    const int idx = rebuild ? tensorIndices[static_cast<size_t>(i)] : i;
    const models::ParamSpec& param = params[static_cast<size_t>(idx)];
    if (param.sparseGrad) {
      out.push_back({{idx}, 0});
      continue;
    }
    const int key = static_cast<int>(param.dtype);
    if (!seen[static_cast<size_t>(key)]) {
      seen[static_cast<size_t>(key)] = true;
      firstSeenOrder.push_back(key);
    }
    Accumulator& acc = accumulators[static_cast<size_t>(key)];
    acc.params.push_back(idx);
    acc.bytes += param.bytes();
    size_t& limitIndex = cursor[static_cast<size_t>(key)];
    acc.sizeLimit = limits[limitIndex];
    if (acc.bytes >= acc.sizeLimit) {
      out.push_back({std::move(acc.params), acc.sizeLimit});
      acc = Accumulator{};
      if (limitIndex + 1 < limits.size()) ++limitIndex;
    }
  }
  for (int key : firstSeenOrder) {
    Accumulator& acc = accumulators[static_cast<size_t>(key)];
    if (!acc.params.empty()) out.push_back({std::move(acc.params), acc.sizeLimit});
  }
  if (!rebuild) {
    // Each bucket's smallest index is its first (indices ascend within a bucket at construction).
    std::sort(out.begin(), out.end(), [](const RawBucket& a, const RawBucket& b) {
      return a.params.front() < b.params.front();
    });
  }
  return buildPlan(params, std::move(out));
}

std::vector<int64_t> constructionLimits(const DdpConfig& config) {
  const int64_t cap = config.bucketCapBytes();
  switch (config.profile) {
    case SemanticsProfile::kV1_5:
      return {kLegacyFirstBucketBytes, cap};
    case SemanticsProfile::kV1_13:
      if (config.dynamicFindUnused()) return {config.firstBucketBytes, cap};
      return {kMaxBucketBytes};
    case SemanticsProfile::kV2_15:
      // bucket_cap_mb_list: the list itself, whatever find_unused / static_graph say
      // (_BucketCapacityConfig.compute_bucket_size_limits, case 1).
      if (!config.bucketCapMbList.empty()) return config.bucketLimitsList();
      if (config.dynamicFindUnused()) {
        if (config.capGivenByUser()) return {cap};
        return {config.firstBucketBytes, cap};
      }
      return {kMaxBucketBytes};
  }
  return {kMaxBucketBytes};
}

std::vector<int64_t> rebuildLimits(const DdpConfig& config) {
  const int64_t cap = config.bucketCapBytes();
  switch (config.profile) {
    case SemanticsProfile::kV1_5:
      return {kLegacyFirstBucketBytes, cap};
    case SemanticsProfile::kV1_13:
      return {config.firstBucketBytes, cap};
    case SemanticsProfile::kV2_15:
      // The list again, now in gradient-ready order (the Reducer's bucket_bytes_cap_list).
      if (!config.bucketCapMbList.empty()) return config.bucketLimitsList();
      if (config.capGivenByUser()) return {cap, cap};
      return {config.firstBucketBytes, cap};
  }
  return {config.firstBucketBytes, cap};
}

bool rebuildEligible(const DdpConfig& config) {
  return config.staticGraph || !config.findUnusedParameters;
}

StatusOr<BucketPlan> constructionPlan(std::span<const models::ParamSpec> params,
                                      const DdpConfig& config) {
  const std::vector<int64_t> limits = constructionLimits(config);
  ASSIGN_OR_RETURN(BucketPlan plan, computeBucketAssignment(params, limits));
  return plan.reversed();
}

StatusOr<BucketPlan> constructionPlan(const models::ModelSpec& model, const DdpConfig& config) {
  return constructionPlan(std::span<const models::ParamSpec>(model.params), config);
}

StatusOr<BucketPlan> rebuiltPlan(std::span<const models::ParamSpec> params, const DdpConfig& config,
                                 std::span<const int> readyOrder) {
  if (params.empty()) return noParamsError();
  RETURN_IF_ERROR(validateReadyOrder(readyOrder, static_cast<int>(params.size())));
  const std::vector<int64_t> limits = rebuildLimits(config);
  if (!config.setLastBucketCap) return computeBucketAssignment(params, limits, readyOrder);
  std::vector<int> reversedOrder(readyOrder.rbegin(), readyOrder.rend());
  ASSIGN_OR_RETURN(BucketPlan plan, computeBucketAssignment(params, limits, reversedOrder));
  return plan.reversed();
}

StatusOr<BucketPlan> rebuiltPlan(const models::ModelSpec& model, const DdpConfig& config,
                                 std::span<const int> readyOrder) {
  return rebuiltPlan(std::span<const models::ParamSpec>(model.params), config, readyOrder);
}

StatusOr<BucketPlan> steadyStatePlan(const models::ModelSpec& model, const DdpConfig& config,
                                     std::optional<std::span<const int>> readyOrder) {
  if (!rebuildEligible(config)) return constructionPlan(model, config);
  if (readyOrder) return rebuiltPlan(model, config, *readyOrder);
  const std::vector<int> order = model.gradReadyOrder(config.autocast);
  return rebuiltPlan(model, config, order);
}

int64_t rebuildIteration(const DdpConfig& config) {
  if (!rebuildEligible(config)) return 0;
  const int64_t k = std::max<int64_t>(config.noSyncPeriod, 1);
  if (config.staticGraph) return k == 1 ? 3 : 2 * k + 1;
  return k + 1;
}

StatusOr<BucketPlan> planForIteration(const models::ModelSpec& model, const DdpConfig& config,
                                      int64_t iteration,
                                      std::optional<std::span<const int>> readyOrder) {
  if (iteration < 1) {
    return invalidArgument("iteration: expected a 1-based iteration number, got " +
                           std::to_string(iteration));
  }
  const int64_t rebuildAt = rebuildIteration(config);
  if (rebuildAt == 0 || iteration < rebuildAt) return constructionPlan(model, config);
  return steadyStatePlan(model, config, readyOrder);
}

std::vector<int64_t> collectiveBytesForBucket(const Bucket& bucket,
                                              std::span<const models::ParamSpec> params,
                                              const CommHook& hook, int64_t syncedIteration) {
  switch (hook.kind) {
    case CommHookKind::kNone:
    case CommHookKind::kAllreduce:
      return {bucket.bytes};
    case CommHookKind::kFp16:
    case CommHookKind::kBf16:
      if (bucket.sparse) return {bucket.bytes};
      return {bucket.numel * 2};
    case CommHookKind::kPowerSgd:
      break;
  }
  // PowerSGD's iteration counter starts at 0 and advances after each step's last bucket, so the
  // synced backward n runs vanilla allreduce while n - 1 < start_powerSGD_iter.
  if (bucket.sparse || syncedIteration - 1 < hook.powerSgdStartIter) return {bucket.bytes};
  const int64_t elementBytes = models::dtypeBytes(bucket.dtype);
  int64_t uncompressed = 0;
  int64_t pElems = 0;
  int64_t qElems = 0;
  for (int p : bucket.params) {
    const models::ParamSpec& param = params[static_cast<size_t>(p)];
    const int64_t numel = param.numel();
    if (param.shape.size() < 2 || numel == 0) {
      uncompressed += numel;
      continue;
    }
    const int64_t n = param.shape[0];
    const int64_t m = numel / n;
    const int64_t r = std::min<int64_t>({n, m, static_cast<int64_t>(hook.powerSgdRank)});
    const double compressedElems =
        static_cast<double>((n + m) * r) * hook.powerSgdMinCompressionRate;
    if (compressedElems < static_cast<double>(n * m)) {
      pElems += n * r;
      qElems += m * r;
    } else {
      uncompressed += numel;
    }
  }
  return {uncompressed * elementBytes, pElems * elementBytes, qElems * elementBytes};
}

std::vector<int64_t> collectiveBytesForBucket(const Bucket& bucket,
                                              std::span<const models::ParamSpec> params,
                                              const DdpConfig& config, int64_t syncedIteration) {
  if (config.mixedPrecision.enabled && !bucket.sparse) {
    return {bucket.numel * models::dtypeBytes(config.mixedPrecision.reduceDtype)};
  }
  return collectiveBytesForBucket(bucket, params, config.commHook, syncedIteration);
}

std::vector<int64_t> coalescedBroadcastBytes(std::span<const models::ParamSpec> tensors,
                                             int64_t groupBytes) {
  std::vector<int64_t> out;
  if (tensors.empty()) return out;
  // Sparse-gradient flags do not apply to broadcasts: every tensor is dense here.
  std::vector<models::ParamSpec> dense(tensors.begin(), tensors.end());
  for (models::ParamSpec& tensor : dense) tensor.sparseGrad = false;
  const int64_t limits[] = {groupBytes};
  StatusOr<BucketPlan> groups = computeBucketAssignment(dense, limits);
  DDPSCOPE_CHECK_MSG(groups.isOk(), groups.status().message().c_str());
  return groups->bucketBytes();
}

std::vector<models::ParamSpec> buffersAsTensors(std::span<const models::BufferSpec> buffers) {
  std::vector<models::ParamSpec> tensors;
  tensors.reserve(buffers.size());
  for (const models::BufferSpec& buffer : buffers) {
    models::ParamSpec tensor;
    tensor.name = buffer.name;
    tensor.shape = buffer.shape;
    tensor.dtype = buffer.dtype;
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

nlohmann::json bucketPlanJson(const models::ModelSpec& model, const DdpConfig& config,
                              const BucketPlan& plan, bool steady) {
  nlohmann::json out;
  out["model"] = model.name;
  out["bucket_cap_bytes"] = config.bucketCapBytes();
  out["first_bucket_bytes"] = config.firstBucketBytes;
  out["iteration"] = steady ? "steady" : "1";
  out["semantics"] = std::string(semanticsProfileName(config.profile));
  if (!config.bucketCapMbList.empty()) out["bucket_cap_mb_list"] = config.bucketCapMbList;
  out["size_limits"] =
      steady && rebuildEligible(config) ? rebuildLimits(config) : constructionLimits(config);
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : plan.buckets) {
    buckets.push_back({{"index", b.index},
                       {"params", b.params},
                       {"bytes", b.bytes},
                       {"size_limit", b.sizeLimit}});
  }
  out["buckets"] = std::move(buckets);
  return out;
}

}  // namespace ddpscope::ddp
