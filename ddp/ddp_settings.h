// The one home of what every DDP setting means: validation, the canonical JSON / trace-metadata
// key and the text a PyTorch user reads. Its flags (names, --help, parsing from flag text) are
// api/ddp_flags.h's: only the front ends' door knows flag names.
//
// Every writer of results or trace metadata writes ddpSettingsJson(), and every reader of a
// trace or a JSON file reads readDdpSettingsJson(): one spelling of each key, one parser, one
// validation. A value crosses each boundary once: flag text → DdpConfig (api/), DdpConfig →
// JSON, JSON → DdpConfig.
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

#include "base/status.h"
#include "ddp/ddp_config.h"

namespace ddpscope::ddp {

// The value texts the settings share with their flags (api/ddp_flags.h): errors name `what`
// (a flag or a JSON key).
// "1,4,25" or "[1,4,25]" → {1, 4, 25}: positive whole MiB (PyTorch's list[int]).
StatusOr<std::vector<int64_t>> parseCapList(std::string_view text, const std::string& what);
std::string capListText(const std::vector<int64_t>& list);  // "1,4,25"
// "fp16", "bf16:fp32", "float16:float32" → MixedPrecision.
StatusOr<MixedPrecision> parseMixedPrecision(std::string_view text, const std::string& what);
std::string mixedPrecisionText(const MixedPrecision& mp);  // "none", "float16:float32"

// The cross-field validation of a complete configuration (DdpConfig::validate), run once at
// the boundary where settings enter: after the flags, after a JSON read.
Status validateDdpConfig(const DdpConfig& config);

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
