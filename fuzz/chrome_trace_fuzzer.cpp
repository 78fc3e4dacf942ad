// Fuzz target: the Chrome trace reader on plain JSON (traces/chrome_reader.h): the tokenizer,
// the event handler, timeline assembly and, for Kineto-style single-rank traces, the rank
// detection. An accepted trace must survive what every command does next: the overlap metrics,
// and a round trip through the writer that the reader accepts again with the same ranks.
#include <cstdint>
#include <sstream>
#include <string>

#include "base/status.h"
#include "fuzz/fuzz_util.h"
#include "traces/chrome_reader.h"
#include "traces/chrome_writer.h"
#include "traces/overlap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddpscope;
  traces::ChromeReadReport report;
  auto timeline = traces::parseChromeTrace(fuzz::asText(data, size), "fuzz.json", {}, &report);
  if (!timeline.isOk()) {
    FUZZ_CHECK(timeline.status().message().find("fuzz.json") != std::string::npos,
               "the error does not name the source: " + timeline.status().message());
    return 0;
  }
  (void)traces::computeOverlap(*timeline);
  std::ostringstream out;
  const Status written = traces::writeChromeTrace(*timeline, out);
  FUZZ_CHECK(written.isOk(), "a trace read cannot be written: " + written.message());
  const std::string text = out.str();
  auto again = traces::parseChromeTrace(text, "round-trip.json");
  FUZZ_CHECK(again.isOk(), "the writer's output is rejected: " + again.status().message());
  FUZZ_CHECK(again->rankCount() == timeline->rankCount(), "round trip changes the rank count");
  return 0;
}
