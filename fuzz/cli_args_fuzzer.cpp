// Fuzz target: the CLI argument parser (cli/arg_parser.h) with the flag sets the commands
// register (DDP settings, simulation flags, layout, sizes, lists) and the typed parsers the
// commands apply to the values. Input: one byte picking the command's flag set (simulate, sweep,
// buckets), then the arguments separated by NUL bytes. Nothing here touches the file system:
// --model values that could name a file are not resolved (see resolvable()).
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "api/allreduce_request.h"
#include "api/buckets_request.h"
#include "api/cluster_settings.h"
#include "api/ddp_flags.h"
#include "api/model_settings.h"
#include "api/simulation_request.h"
#include "base/status.h"
#include "cli/arg_parser.h"
#include "cli/common.h"
#include "ddp/ddp_settings.h"
#include "fuzz/fuzz_util.h"
#include "models/model_resolver.h"

namespace {

using namespace ddpscope;
using cli::ArgParser;

ArgParser makeParser(int command) {
  if (command == 2) {
    ArgParser parser("ddpscope buckets", "--model M [options]", "bucket plan");
    parser.options(api::modelSettingList());
    parser.options(api::ddpSettingList(api::DdpSettingSet::bucketPlan()));
    parser.option("iteration", "1|steady", "which plan")
        .option("ready-order", "LIST", "ready order")
        .option("ready-order-file", "PATH", "ready order file")
        .flag("json", "json");
    return parser;
  }
  ArgParser parser(command == 1 ? "ddpscope sweep" : "ddpscope simulate", "[options]", "sim");
  parser.options(api::simulationSettingList(/*sweep=*/command == 1));
  parser.option("trace", "PATH", "trace").option("size", "BYTES", "size").flag("json", "json");
  parser.positionalList("files", "inputs", /*required=*/false);
  return parser;
}

// Whether the whole request is resolved for this --model value: shorthands (their builders take
// the fuzzed sizes) and the two small zoo models. Not a value the resolver would read from disk
// (the fuzzer must not open /dev/zero), and not the big zoo models, whose JSON alone takes most
// of the 1 s budget under ASan.
bool resolvable(const std::string& text) {
  if (text.find('/') != std::string::npos || text.ends_with(".json")) return false;
  std::error_code ec;
  if (std::filesystem::exists(text, ec) || ec) return false;
  return text.find(':') != std::string::npos || text == "mlp-tiny" || text == "mlp-wide";
}

void check(const Status& status) {
  if (!status.isOk()) FUZZ_CHECK(!status.message().empty(), "an error without a message");
}
template <typename T>
void check(const StatusOr<T>& value) {
  check(value.status());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int command = data[0] % 3;
  std::vector<std::string> argv;
  for (std::string_view piece :
       fuzz::splitInput(fuzz::asText(data + 1, size - 1), std::string_view("\0", 1))) {
    argv.emplace_back(piece);
  }
  // parse() is const: the three parsers are built once per process, not once per input.
  static const ArgParser parsers[3] = {makeParser(0), makeParser(1), makeParser(2)};
  const ArgParser& parser = parsers[command];
  std::ostringstream notes;
  auto args = parser.parse(argv, notes);
  if (!args.isOk()) {
    FUZZ_CHECK(args.status().message().find("ddpscope") != std::string::npos ||
                   args.status().message().find("--") != std::string::npos ||
                   !args.status().message().empty(),
               "an error without a message");
    return 0;
  }
  if (args->helpRequested()) {
    FUZZ_CHECK(!parser.helpText().empty(), "empty help");
    return 0;
  }
  const bool sweep = command == 1;
  check(api::parseDdpSettings(
      *args, command == 2 ? api::DdpSettingSet::bucketPlan() : api::simulationDdpSettings(sweep)));
  for (const char* flag : {"batch", "seq-len", "image-size", "iterations"}) {
    check(args->positiveInt(flag, 1));
    check(args->nonNegativeInt(flag, 1));
  }
  check(args->positiveDouble("contention", 1));
  check(args->nonNegativeDouble("contention", 1));
  if (auto v = args->value("size")) check(api::parseByteSize(*v, "--size"));
  if (auto v = args->value("compile")) check(api::parseCompileModes(*v, sweep));
  if (auto v = args->value("ready-order")) check(api::parseIndexList(*v, "--ready-order"));
  if (command == 2) return 0;
  check(api::parseLayoutSettings(*args));
  if (sweep) {
    if (auto v = args->value("bucket-cap-mb")) check(parsePositiveList(*v, "--bucket-cap-mb"));
    if (auto v = args->value("nodes")) check(parsePositiveIntList(*v, "--nodes"));
    if (auto v = args->value("world-size")) check(parsePositiveIntList(*v, "--world-size"));
  }
  // The whole request (model from the zoo or a shorthand, a built-in cluster, every setting),
  // unless a value would be read from a file.
  const auto model = args->value("model");
  const auto cluster = args->value("cluster");
  if (model && resolvable(*model) && !(cluster && looksLikeFile(*cluster)) &&
      !args->has("compute-from")) {
    check(api::parseSimulationRequest(*args, sweep));
  }
  return 0;
}
