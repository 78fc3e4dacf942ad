// The DDP settings as flags: each setting's command-line flag (the Python API's keyword argument
// with dashes for underscores), --help text and the text it takes, applied to a ddp::DdpConfig.
// Only api/ knows flag names; ddp/ddp_settings.h holds what the flags set (validation, the
// canonical JSON / trace-metadata keys, the PyTorch-style text).
//
// Every command that takes DDP settings (simulate, sweep, buckets, replay, plan, the runtime
// worker) registers its flags from ddpSettingSpecs (the CLI with ArgParser::options, Python by
// name); a value crosses each boundary once: flag text → DdpConfig here, DdpConfig → JSON and
// JSON → DdpConfig in ddp/ddp_settings.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"
#include "ddp/ddp_config.h"
#include "ddp/ddp_settings.h"

namespace ddpscope::api {

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
Status applyDdpSetting(DdpSetting id, std::string_view text, ddp::DdpConfig& config);

// The specs of `settings` as generic settings (flag names, value names, help), in --help order:
// what a command-line flag set or the Python API registers.
std::vector<SettingSpec> ddpSettingList(DdpSettingSet settings);

// Applies every given setting of `settings` in `values` to `base`, then validates the result
// once. Errors name the flag ("--bucket-cap-mb: expected a positive number, got '0'").
StatusOr<ddp::DdpConfig> parseDdpSettings(const SettingValues& values, DdpSettingSet settings,
                                          ddp::DdpConfig base = {});

// Whether `values` holds any setting of `settings`.
bool anyDdpSetting(const SettingValues& values, DdpSettingSet settings);

// The flags that reproduce `config` from a default DdpConfig, in --help order: only settings
// that differ from the default (an explicit bucket_cap_mb is always spelled). Settings without
// a flag (PowerSGD's start iteration, DDP_SET_LAST_BUCKET_CAP, ...) are not expressible.
std::vector<std::string> ddpSettingsFlags(const ddp::DdpConfig& config);
// The same settings by name, as SettingValues holds them: {"bucket-cap-mb", "25"}, a switch
// with "" ({"find-unused", ""}), in the same order.
std::vector<std::pair<std::string, std::string>> ddpSettingValues(const ddp::DdpConfig& config);

}  // namespace ddpscope::api
