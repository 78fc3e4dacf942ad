#include "cli/ddp_flags.h"

namespace ddpscope::cli {

void addDdpFlags(ArgParser& parser, ddp::DdpSettingSet settings) {
  parser.options(ddp::ddpSettingList(settings));
}

StatusOr<ddp::DdpConfig> parseDdpFlags(const ParsedArgs& args, ddp::DdpSettingSet settings,
                                       ddp::DdpConfig base) {
  return ddp::parseDdpSettings(args, settings, base);
}

}  // namespace ddpscope::cli
