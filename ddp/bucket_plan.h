// BucketPlan: how DDP groups parameter gradients into flat buckets, and in which order the
// buckets are allreduced.
//
// computeBucketAssignment() reproduces PyTorch's compute_bucket_assignment_by_size
// (docs/spec/ddp-semantics.md §1.2) exactly:
//   - one accumulator and one limit cursor per dtype (ddpscope models live on one device, so
//     the (dtype, device) key reduces to the dtype); the cursor starts at limits[0];
//   - each dense parameter is appended, its bytes added (no padding), the accumulator's limit set
//     to the cursor's limit, and the bucket closed when bytes >= limit (test *after* adding); a
//     close advances the cursor, which sticks at the last limit;
//   - a parameter expecting a sparse gradient becomes a singleton bucket with limit 0 at once
//     and leaves the dense accumulators untouched;
//   - after the scan the non-empty accumulators are emitted in the order their dtype was first
//     seen (PyTorch uses hash-map order; rank 0's broadcast makes any order consistent across
//     ranks, and ddpscope picks first-seen order so the output is deterministic);
//   - at construction (tensorIndices empty) buckets are sorted by their smallest parameter index;
//     in a rebuild they stay in closing order with leftovers last.
// constructionPlan() then reverses that list (§1.4), so bucket 0 holds the last-registered
// parameters; rebuiltPlan() does not. Complexity: O(P + B log B) for P parameters, B buckets.
//
// Invariants of every BucketPlan returned here: each parameter index 0..P-1 is in exactly one
// bucket; buckets are non-empty, single-dtype, and a sparse-gradient parameter is alone in its
// bucket; Bucket::index equals its position; locations[p] points back at p.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"

namespace ddpscope::ddp {

inline constexpr int64_t kMaxBucketBytes = DdpConfig::kMaxBucketBytes;

struct Bucket {
  int index = 0;                 // reduction order: buckets launch strictly 0, 1, 2, ...
  std::vector<int> params;       // indices into model.parameters(), in flat-buffer order
  std::vector<int64_t> offsets;  // element offset of params[k] in the flat buffer
  int64_t numel = 0;             // elements in the flat buffer
  int64_t bytes = 0;             // numel * element size (what a plain allreduce moves)
  int64_t sizeLimit = 0;         // the limit in force when the bucket was built (0: sparse)
  models::DType dtype = models::DType::kFloat32;
  bool sparse = false;  // a single parameter whose gradient is sparse
};

struct ParamLocation {
  int bucket = -1;  // Bucket::index
  int slot = -1;    // position in Bucket::params
};

struct BucketPlan {
  std::vector<Bucket> buckets;
  std::vector<ParamLocation> locations;  // indexed by parameter index

  int numBuckets() const { return static_cast<int>(buckets.size()); }
  int numParams() const { return static_cast<int>(locations.size()); }
  int64_t totalBytes() const;
  // CHECKs that paramIndex is in range.
  const ParamLocation& locate(int paramIndex) const;
  int bucketOf(int paramIndex) const { return locate(paramIndex).bucket; }
  std::vector<std::vector<int>> indexLists() const;
  std::vector<int64_t> bucketBytes() const;
  std::vector<int64_t> sizeLimits() const;
  // Same buckets in the opposite order, renumbered (what distributed.py hands the Reducer).
  BucketPlan reversed() const;
  // "[[10] 4000 B limit 26214400, [8, 9] ...]" for messages and debugging.
  std::string toString() const;
};

// Sizes of the two rank-0 broadcasts of sync_bucket_indices during a rebuild (§2): an int32
// tensor of P+1 elements (flat indices + bucket count) and one of num_buckets elements.
struct RebuildSync {
  int64_t indicesElems = 0;  // P + 1
  int64_t countsElems = 0;   // number of buckets
  int64_t indicesBytes() const { return 4 * indicesElems; }
  int64_t countsBytes() const { return 4 * countsElems; }
};
RebuildSync rebuildSyncSizes(const BucketPlan& plan);

// Builds a plan from explicit index lists (for example rank 0's broadcast) and runs the
// initialize_buckets checks (§1.6, E9): non-empty buckets, a sparse-gradient parameter only
// alone, one dtype per bucket, every parameter exactly once.
StatusOr<BucketPlan> makeBucketPlan(std::span<const models::ParamSpec> params,
                                    const std::vector<std::vector<int>>& indexLists,
                                    const std::vector<int64_t>& sizeLimits);

// OK iff `order` is a permutation of 0..numParams-1. Errors: "ready order: parameter 7 is
// missing", "ready order: parameter 3 appears twice", "ready order: index 99 out of range [0, 62)".
Status validateReadyOrder(std::span<const int> order, int numParams);

// The low-level routine (§1.2). tensorIndices empty = construction (iterate params in index
// order, sort the result); otherwise a rebuild iterating params[tensorIndices[i]] (must be a
// permutation), unsorted. Returns buckets in the routine's output order, NOT reversed.
StatusOr<BucketPlan> computeBucketAssignment(std::span<const models::ParamSpec> params,
                                             std::span<const int64_t> limits,
                                             std::span<const int> tensorIndices = {});

// Byte limits per the version matrix (§1.3, Appendix B).
//   construction: [maxsize] unless find_unused && !static_graph; then [first, cap]
//                 (2.15 profile with a user-set cap: [cap]; 1.5 profile: always [1 MiB, cap]).
//   rebuild:      [first, cap] (2.15 profile with a user-set cap: [cap, cap];
//                 1.5 profile: first fixed at 1 MiB).
//   2.15 with bucket_cap_mb_list: the list (in bytes) for both, always: at construction it is
//   applied in definition order and the buckets reversed after (list[0] limits the
//   first-defined parameters, reduced last); in the rebuild it is applied in gradient-ready
//   order (list[0] limits the first-reduced bucket). The cursor sticks at the last value.
std::vector<int64_t> constructionLimits(const DdpConfig& config);
std::vector<int64_t> rebuildLimits(const DdpConfig& config);
// static_graph || !find_unused_parameters (the has_rebuilt part is the Reducer's state).
bool rebuildEligible(const DdpConfig& config);

// Iteration-1 plan: computeBucketAssignment(params, constructionLimits) reversed. Errors on an
// empty parameter list (E6). Every function here takes a valid config (validateDdpConfig in
// ddp_settings.h): settings are validated once, where they enter (flags, JSON).
StatusOr<BucketPlan> constructionPlan(std::span<const models::ParamSpec> params,
                                      const DdpConfig& config);
StatusOr<BucketPlan> constructionPlan(const models::ModelSpec& model, const DdpConfig& config);

// The plan a rebuild produces from a recorded gradient-ready order (a permutation of 0..P-1),
// with rebuildLimits and no sort and no reversal. With config.setLastBucketCap the order is
// reversed first and the result reversed after. Does not check rebuildEligible().
StatusOr<BucketPlan> rebuiltPlan(std::span<const models::ParamSpec> params, const DdpConfig& config,
                                 std::span<const int> readyOrder);
StatusOr<BucketPlan> rebuiltPlan(const models::ModelSpec& model, const DdpConfig& config,
                                 std::span<const int> readyOrder);

// The plan in force once warm-up is over: rebuiltPlan(readyOrder, or model.gradReadyOrder()
// when absent) if rebuildEligible, else the construction plan.
StatusOr<BucketPlan> steadyStatePlan(const models::ModelSpec& model, const DdpConfig& config,
                                     std::optional<std::span<const int>> readyOrder = std::nullopt);

// The plan as `ddpscope buckets --json` and `ddpscope-run --dump-plan` print it: model,
// bucket_cap_bytes, first_bucket_bytes, iteration ("1" or "steady"), semantics, size_limits
// (construction limits for iteration 1 and for never-rebuilt steady plans, else rebuild limits)
// and buckets [{index, params, bytes, size_limit}] in reduction order.
nlohmann::json bucketPlanJson(const models::ModelSpec& model, const DdpConfig& config,
                              const BucketPlan& plan, bool steady);

// 1-based iteration at whose forward the rebuild happens, or 0 if never (§2 table):
// dynamic find_unused: never; otherwise the forward after the first synced backward that records
// the ready order: K+1 for no_sync period K (2 without no_sync); static_graph: 3 without no_sync
// (iteration 1 only counts hooks). With static_graph and K > 1 the iteration-1 hook counting
// spans the first K backwards (num_bwd_calls only advances after a finalize), giving 2K+1.
int64_t rebuildIteration(const DdpConfig& config);

// The plan used by the backward of 1-based `iteration`: construction plan before
// rebuildIteration(config), steadyStatePlan after.
StatusOr<BucketPlan> planForIteration(
    const models::ModelSpec& model, const DdpConfig& config, int64_t iteration,
    std::optional<std::span<const int>> readyOrder = std::nullopt);

// Bytes of each collective a comm hook issues for one bucket, in issue order (§3.13):
// none/allreduce: {bytes}; fp16/bf16: {numel * 2}; PowerSGD: {bytes} before compression starts
// (synced iteration <= start_powerSGD_iter), then three sequential allreduces
// {U, P, Q} * element size where U counts uncompressed elements, P = sum n*r', Q = sum m*r' over
// compressed parameters viewed as n x m (dim 0 x rest), r' = min(n, m, rank); a parameter is
// compressed iff it has >= 2 dims and (n + m) * r' * min_compression_rate < n * m. Entries may
// be 0 (PowerSGD still issues the collective). Sparse buckets: {bytes}.
// `syncedIteration` is 1-based and counts synchronized backwards only.
std::vector<int64_t> collectiveBytesForBucket(const Bucket& bucket,
                                              std::span<const models::ParamSpec> params,
                                              const CommHook& hook, int64_t syncedIteration);

// The same for a whole configuration: with mixed_precision the bucket (numel elements) is
// reduced in reduce_dtype: {numel * element size of reduce_dtype}; otherwise as above with
// config.commHook.
std::vector<int64_t> collectiveBytesForBucket(const Bucket& bucket,
                                              std::span<const models::ParamSpec> params,
                                              const DdpConfig& config, int64_t syncedIteration);

// §3.11 coalesced broadcast (module-state sync at construction, buffer sync before forward):
// byte sizes of the broadcasts in issue order. Tensors are grouped by the same routine with the
// single limit `groupBytes` (250 MiB), per dtype, overshooting like buckets, sorted by smallest
// index. Empty input gives no broadcasts. At most 2 are in flight at once in PyTorch.
std::vector<int64_t> coalescedBroadcastBytes(std::span<const models::ParamSpec> tensors,
                                             int64_t groupBytes = DdpConfig::kBroadcastBucketBytes);
// Buffers viewed as dense tensors for coalescedBroadcastBytes.
std::vector<models::ParamSpec> buffersAsTensors(std::span<const models::BufferSpec> buffers);

}  // namespace ddpscope::ddp
