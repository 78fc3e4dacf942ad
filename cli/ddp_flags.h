// The DDP settings as command-line flags: the ArgParser side of ddp/ddp_settings.h, which owns
// every setting's flag name, --help text, parsing, validation and JSON key. Every command that
// takes DDP settings (simulate, sweep, buckets, replay, the ddpscope-run worker) registers and
// parses them here, so a flag is spelled, explained and checked the same way everywhere.
#pragma once

#include "base/status.h"
#include "cli/arg_parser.h"
#include "ddp/ddp_config.h"
#include "ddp/ddp_settings.h"

namespace ddpscope::cli {

// Registers the flags of `settings` (in ddp's --help order).
void addDdpFlags(ArgParser& parser, ddp::DdpSettingSet settings);

// Applies every given flag of `settings` to `base`, then validates the result once. Errors name
// the flag ("--bucket-cap-mb: expected a positive number, got '0'").
StatusOr<ddp::DdpConfig> parseDdpFlags(const ParsedArgs& args, ddp::DdpSettingSet settings,
                                       ddp::DdpConfig base = {});

}  // namespace ddpscope::cli
