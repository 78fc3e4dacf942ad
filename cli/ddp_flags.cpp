#include "cli/ddp_flags.h"

#include <string>

namespace ddpscope::cli {

void addDdpFlags(ArgParser& parser, ddp::DdpSettingSet settings) {
  for (const ddp::DdpSettingSpec& spec : ddp::ddpSettingSpecs()) {
    if (!settings.contains(spec.id)) continue;
    if (spec.valueName.empty()) {
      parser.flag(std::string(spec.flag), std::string(spec.help));
    } else {
      parser.option(std::string(spec.flag), std::string(spec.valueName), std::string(spec.help));
    }
  }
}

StatusOr<ddp::DdpConfig> parseDdpFlags(const ParsedArgs& args, ddp::DdpSettingSet settings,
                                       ddp::DdpConfig base) {
  for (const ddp::DdpSettingSpec& spec : ddp::ddpSettingSpecs()) {
    if (!settings.contains(spec.id)) continue;
    if (auto text = args.value(std::string(spec.flag))) {
      RETURN_IF_ERROR(ddp::applyDdpSetting(spec.id, *text, base));
    }
  }
  RETURN_IF_ERROR(ddp::validateDdpConfig(base));
  return base;
}

bool anyDdpFlag(const ParsedArgs& args, ddp::DdpSettingSet settings) {
  for (const ddp::DdpSettingSpec& spec : ddp::ddpSettingSpecs()) {
    if (settings.contains(spec.id) && args.has(std::string(spec.flag))) return true;
  }
  return false;
}

}  // namespace ddpscope::cli
