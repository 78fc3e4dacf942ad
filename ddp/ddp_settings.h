// The one home of every DDP setting: its command-line flag, --help text, parsing, validation
// and its canonical JSON / trace-metadata key.
//
// Every command that takes DDP settings (simulate, sweep, buckets, replay, plan, the runtime
// worker) registers its flags from kDdpSettings (the CLI registers them with ArgParser::options),
// every writer of results or trace metadata writes ddpSettingsJson(), and every reader of a trace
// or a JSON file reads readDdpSettingsJson(): one spelling of each flag and key, one parser, one
// validation. A value crosses each boundary once: flag text → DdpConfig, DdpConfig → JSON,
// JSON → DdpConfig.
//
// Canonical keys use PyTorch's argument names where PyTorch has the argument
// (bucket_cap_mb, find_unused_parameters, static_graph, gradient_as_bucket_view,
// broadcast_buffers, bucket_cap_mb_list, batched_grad_copy, skip_all_reduce_unused_params,
// lazy_bucket_allocation, mixed_precision) and ddpscope's otherwise (first_bucket_bytes,
// no_sync_steps, comm_hook, powersgd_*, semantics, bucket_cap_set_by_user,
// set_last_bucket_cap, init_sync_buffers). broadcast_buffers holds the per-forward buffer sync
// (PyTorch 2.15's forward_sync_buffers, also read as an alias); init_sync_buffers whether
// construction syncs buffers (false only for the deprecated broadcast_buffers=False).
// bucket_cap_mb_list is an array of integers ([] = not given; its JSON text "[1,4]" is read
// too, as trace metadata stores it); mixed_precision is "none" or "PARAM:REDUCE" with PyTorch
// dtype names ("float16:float32"). Booleans are written as
// JSON booleans; readers also accept 0/1 (trace metadata stores integers). Keys written by
// earlier ddpscope versions are read as aliases: find_unused, no_sync, first_bucket_mb.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "ddp/ddp_config.h"

namespace ddpscope::ddp {

enum class DdpSetting {
  kBucketCapMb,
  kFirstBucketMb,
  kFindUnused,
  kStaticGraph,
  kGradientAsBucketView,
  kNoSyncSteps,
  kCommHook,
  kNoBroadcastBuffers,
  kSemantics,
  // PyTorch 2.15 arguments (need semantics 2.15, the default).
  kBucketCapMbList,
  kBatchedGradCopy,
  kSkipAllReduceUnused,
  kNoForwardSyncBuffers,
  kLazyBucketAllocation,
  kMixedPrecision,
  // Not a DDP argument: the training loop's torch.autocast, which changes autograd's
  // gradient-ready order and with it the rebuilt buckets.
  kAutocast,
};

struct DdpSettingSpec {
  DdpSetting id;
  std::string_view flag;       // without "--": "bucket-cap-mb"
  std::string_view valueName;  // shown in --help ("X"); empty for a switch
  std::string_view help;       // one line for --help
  bool changesBucketPlan;      // the setting changes which parameters share a bucket
};

// Every DDP setting, in --help order.
std::span<const DdpSettingSpec> ddpSettingSpecs();
const DdpSettingSpec& ddpSettingSpec(DdpSetting id);

// A set of settings (the ones a command offers).
class DdpSettingSet {
 public:
  static DdpSettingSet all();
  // Those that change the bucket plan (`ddpscope buckets`).
  static DdpSettingSet bucketPlan();
  DdpSettingSet without(DdpSetting id) const;
  bool contains(DdpSetting id) const { return (m_bits >> static_cast<unsigned>(id)) & 1u; }

 private:
  explicit DdpSettingSet(uint32_t bits) : m_bits(bits) {}
  uint32_t m_bits;
};

// Applies one flag's text to `config` ("" for a switch). Errors name the flag and what was
// expected: "--bucket-cap-mb: expected a positive number, got '0'". Does not validate the
// whole config (validateDdpConfig does, once, after every flag is applied).
Status applyDdpSetting(DdpSetting id, std::string_view text, DdpConfig& config);

// The specs of `settings` as generic settings (flag names, value names, help), in --help order:
// what a command-line flag set or the Python API registers.
std::vector<SettingSpec> ddpSettingList(DdpSettingSet settings);

// Applies every given setting of `settings` in `values` to `base`, then validates the result
// once. Errors name the flag ("--bucket-cap-mb: expected a positive number, got '0'").
StatusOr<DdpConfig> parseDdpSettings(const SettingValues& values, DdpSettingSet settings,
                                     DdpConfig base = {});

// Whether `values` holds any setting of `settings`.
bool anyDdpSetting(const SettingValues& values, DdpSettingSet settings);

// The cross-field validation of a complete configuration (DdpConfig::validate), run once at
// the boundary where settings enter: after the flags, after a JSON read.
Status validateDdpConfig(const DdpConfig& config);

// The flags that reproduce `config` from a default DdpConfig, in --help order: only settings
// that differ from the default (an explicit bucket_cap_mb is always spelled). Settings without
// a flag (PowerSGD's start iteration, DDP_SET_LAST_BUCKET_CAP, ...) are not expressible.
std::vector<std::string> ddpSettingsFlags(const DdpConfig& config);
// The same settings by name, as SettingValues holds them: {"bucket-cap-mb", "25"}, a switch
// with "" ({"find-unused", ""}), in the same order.
std::vector<std::pair<std::string, std::string>> ddpSettingValues(const DdpConfig& config);

// The settings as a PyTorch user writes them, for stated assumptions and the GUI:
//   "DDP(bucket_cap_mb=None (25 MiB), find_unused_parameters=False, static_graph=False,
//    gradient_as_bucket_view=False, forward_sync_buffers=True); first bucket 1 MiB; every step
//    synchronized; comm hook none; PyTorch semantics 2.15"
// (broadcast_buffers=False is spelled as such: it also drops buffers from the init sync; the
// 2.15 arguments appear only when set).
std::string ddpSettingsText(const DdpConfig& config);

// The canonical JSON object of every setting (worldSize excluded: it is the layout's).
nlohmann::json ddpSettingsJson(const DdpConfig& config);

// Whether the object holds any DDP setting key (canonical or legacy): a PyTorch profiler trace
// imported without settings, for instance, holds none.
bool containsDdpSettings(const nlohmann::json& object);

// Reads the canonical keys (and the legacy aliases) from a JSON object; absent keys keep
// `base`'s values, unknown keys are ignored (the object usually holds other metadata). Errors
// name `origin` and the key; the result is validated.
StatusOr<DdpConfig> readDdpSettingsJson(const nlohmann::json& object, const std::string& origin,
                                        const DdpConfig& base = {});

}  // namespace ddpscope::ddp
