// A long run end to end: `ddpscope run` trains mlp-tiny for 10,000 iterations on 2 ranks and the
// trace it leaves opens the way the GUI opens it (gui_model's loadTraceDocument: the Chrome
// reader, the document's rows and the overlap figures). With the profiler's ring buffer
// (--trace-iterations, default kDefaultTraceIterations) the trace holds exactly the last K
// iterations of each rank. Peak RSS is reported in docs/guide.md (measured with /usr/bin/time -v),
// not asserted here: the bound itself is asserted structurally in profiler_test.cpp.
#include <gtest/gtest.h>

#include <QString>
#include <filesystem>
#include <string>

#include "cli/run_worker.h"
#include "gui/model/trace_document.h"
#include "gui/model/trace_loader.h"
#include "tests/runtime/job_test_util.h"

namespace ddpscope::runtime {
namespace {

namespace fs = std::filesystem;

TEST(LongRunTest, TenThousandIterationsAtTwoRanksLeaveATraceOfTheLastKThatTheGuiOpens) {
  const fs::path trace =
      fs::temp_directory_path() / ("ddpscope_long_run_" + std::to_string(::getpid()) + ".json");
  const test_util::ProcessRun r = test_util::run(
      std::string(DDPSCOPE_CLI) + " run --nproc 2 -- --model mlp-tiny --iterations 10000 --trace " +
      trace.string());
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const std::string& output = r.output;
  EXPECT_NE(output.find("(medians over iterations 9001-10000: the profiler keeps the last 1000"),
            std::string::npos)
      << output;

  StatusOr<gui::TraceDocumentPtr> document =
      gui::loadTraceDocument(QString::fromStdString(trace.string()));
  ASSERT_TRUE(document.isOk()) << document.status().message();
  const traces::Timeline& timeline = (*document)->timeline();
  ASSERT_EQ(timeline.rankCount(), 2);
  for (int rank = 0; rank < 2; ++rank) {
    const auto iterations = timeline.iterations(rank);
    ASSERT_EQ(iterations.size(), static_cast<size_t>(cli::kDefaultTraceIterations)) << rank;
    EXPECT_EQ(iterations.front().index, 10000 - cli::kDefaultTraceIterations + 1);
    EXPECT_EQ(iterations.back().index, 10000);
  }
  EXPECT_EQ(timeline.metadata().getInt("trace_dropped_iterations"),
            10000 - cli::kDefaultTraceIterations);
  EXPECT_EQ((*document)->overlap().size(), 2u);
  EXPECT_GT((*document)->rowCount(), 0);
  fs::remove(trace);
}

}  // namespace
}  // namespace ddpscope::runtime
