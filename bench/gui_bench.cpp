// ddpscope-gui speed goals (offscreen; QT_QPA_PLATFORM=offscreen is set when unset):
//
// BM_OpenTraceToFirstPaint: open a 1M-event Chrome trace (16 ranks × {compute, comm,
//   iterations}, written once with traces' ChromeTraceWriter) — read, parse, index
//   (TraceDocument) — and paint the first frame of a 1600×900 TimelineView into a QImage.
//   Target ≤ 1 s wall (measured runs: docs/performance.md).
// BM_PaintFrame/0: one frame at full zoom-out; BM_PaintFrame/1: mid zoom (2 % of the trace,
//   a few iterations). Target ≤ 16 ms. Counters: spans and fold marks painted.
// BM_WhatIfChangeToRepaint: the What-if panel, gpt2-small on dgx-a100 at 64 ranks: change the
//   bucket cap, wait for the re-simulated timeline to be repainted; manual time = the panel's
//   own change → repaint clock (debounce included). Target ≤ 100 ms.
// BM_OpenTorchRun/0: traces::importKinetoTraces alone on a directory of per-rank PyTorch
//   profiler traces (the 2-rank gloo fixtures of tests/data/torch/); BM_OpenTorchRun/1: the
//   GUI's loadTraces on that directory (each file read once to classify it, then the import,
//   then the TraceDocument) — the ratio is what the classifying read costs.
// Each benchmark verifies what it painted (span counts, document size, settings shown).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <QApplication>
#include <QEventLoop>
#include <QImage>
#include <QPainter>
#include <QTimer>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gui/model/trace_loader.h"
#include "gui/model/whatif.h"
#include "gui/model/zoom_stack.h"
#include "gui/widgets/timeline_view.h"
#include "gui/widgets/whatif_panel.h"
#include "traces/chrome_writer.h"
#include "traces/kineto_import.h"

namespace {

using ddpscope::Nanos;
using namespace ddpscope::gui;
using namespace ddpscope::traces;

constexpr int kRanks = 16;
constexpr int64_t kEvents = 1'000'000;
constexpr int kFrameWidth = 1600;
constexpr int kFrameHeight = 900;

// Per iteration and rank: 150 forward, 300 backward kernels, 48 bucket allreduces on the comm
// stream (overlapping backward), 1 optimizer kernel, 1 iteration marker = 500 events.
std::string benchTracePath() {
  static std::string path;
  if (!path.empty()) return path;
  path = (std::filesystem::temp_directory_path() /
          ("ddpscope_gui_bench_" + std::to_string(::getpid()) + ".json"))
             .string();
  auto writer = ChromeTraceWriter::open(path);
  if (!writer.isOk()) std::abort();
  ChromeTraceWriter& w = **writer;
  w.setTraceName("gui_bench 1M events");
  w.setMetadata(Args{{"world_size", int64_t{kRanks}}});
  const int64_t iterations = kEvents / kRanks / 500;
  for (int r = 0; r < kRanks; ++r) {
    w.beginRank(r);
    w.declareLane(r, 0, "compute", LaneKind::kCompute, 0);
    w.declareLane(r, 1, "comm stream 0", LaneKind::kComm, 1);
    w.declareLane(r, 2, "iterations", LaneKind::kHost, 2);
  }
  for (int r = 0; r < kRanks; ++r) {
    int64_t t = 1000 * r;
    // compute lane
    std::vector<Span> comm;
    std::vector<Span> steps;
    for (int64_t it = 1; it <= iterations; ++it) {
      int64_t stepStart = t;
      for (int k = 0; k < 150; ++k, t += 20'000) {
        w.addSpan(
            r, 0,
            Span{
                "fwd layer " + std::to_string(k), Category::kForward, Nanos(t), Nanos(18'000), {}});
      }
      int64_t backwardStart = t;
      for (int k = 0; k < 300; ++k, t += 20'000) {
        w.addSpan(r, 0,
                  Span{"bwd layer " + std::to_string(k),
                       Category::kBackward,
                       Nanos(t),
                       Nanos(19'000),
                       {}});
      }
      int64_t c = backwardStart + 200'000;
      for (int b = 0; b < 48; ++b, c += 130'000) {
        comm.push_back(Span{
            "allreduce bucket " + std::to_string(b), Category::kAllreduce, Nanos(c), Nanos(125'000),
            Args{{"bucket", int64_t{b}}, {"bytes", int64_t{26'214'400}}, {"iteration", it}}});
      }
      t = std::max(t, c) + 10'000;
      w.addSpan(r, 0, Span{"optimizer.step", Category::kOptimizer, Nanos(t), Nanos(400'000), {}});
      t += 410'000;
      steps.push_back(Span{"ProfilerStep#" + std::to_string(it), Category::kIteration,
                           Nanos(stepStart), Nanos(t - stepStart), Args{{"iteration", it}}});
    }
    for (const Span& s : comm) w.addSpan(r, 1, s);
    for (const Span& s : steps) w.addSpan(r, 2, s);
  }
  if (!w.finish().isOk()) std::abort();
  return path;
}

TraceDocumentPtr benchDocument() {
  static TraceDocumentPtr doc;
  if (!doc) {
    auto loaded = loadTraceDocument(QString::fromStdString(benchTracePath()));
    if (!loaded.isOk()) std::abort();
    doc = *loaded;
  }
  return doc;
}

void paintInto(TimelineView& view, QImage& image) {
  image.fill(Qt::white);
  QPainter painter(&image);
  view.render(&painter);
}

void BM_OpenTraceToFirstPaint(benchmark::State& state) {
  std::string path = benchTracePath();
  QImage image(kFrameWidth, kFrameHeight, QImage::Format_ARGB32_Premultiplied);
  size_t spans = 0;
  for (auto _ : state) {
    auto doc = loadTraceDocument(QString::fromStdString(path));
    if (!doc.isOk()) {
      state.SkipWithError(doc.status().message().c_str());
      return;
    }
    ZoomStack zoom;
    TimelineView view(&zoom);
    view.resize(kFrameWidth, kFrameHeight);
    view.setDocument(*doc, (*doc)->startTime());
    zoom.setFullRange(Nanos(0), (*doc)->endTime() - (*doc)->startTime());
    paintInto(view, image);
    spans = (*doc)->spanCount();
    if (view.lastPaintedSpans() + view.lastPaintedFolds() == 0)
      state.SkipWithError("nothing painted");
  }
  if (spans < static_cast<size_t>(kEvents * 0.99)) state.SkipWithError("wrong span count");
  state.counters["spans"] = static_cast<double>(spans);
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
}
BENCHMARK(BM_OpenTraceToFirstPaint)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PaintFrame(benchmark::State& state) {
  TraceDocumentPtr doc = benchDocument();
  ZoomStack zoom;
  TimelineView view(&zoom);
  view.resize(kFrameWidth, kFrameHeight);
  view.setDocument(doc, doc->startTime());
  Nanos total = doc->endTime() - doc->startTime();
  zoom.setFullRange(Nanos(0), total);
  if (state.range(0) == 1) zoom.zoomTo(total * 49 / 100, total * 51 / 100);  // 2 % of the trace
  QImage image(kFrameWidth, kFrameHeight, QImage::Format_ARGB32_Premultiplied);
  for (auto _ : state) paintInto(view, image);
  if (view.lastPaintedSpans() + view.lastPaintedFolds() == 0)
    state.SkipWithError("nothing painted");
  state.counters["spans_painted"] = view.lastPaintedSpans();
  state.counters["folds_painted"] = view.lastPaintedFolds();
  state.SetLabel(state.range(0) == 0 ? "full zoom-out" : "mid zoom (2 %)");
}
BENCHMARK(BM_PaintFrame)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_WhatIfChangeToRepaint(benchmark::State& state) {
  WhatIfPanel panel;  // defaults: gpt2-small, dgx-a100, 64 ranks
  panel.resize(kFrameWidth, kFrameHeight);
  panel.show();
  auto waitShown = [&panel]() {
    QEventLoop loop;
    QObject::connect(&panel, &WhatIfPanel::resultShown, &loop, &QEventLoop::quit);
    QTimer::singleShot(10000, &loop, &QEventLoop::quit);
    loop.exec();
  };
  waitShown();
  const double caps[] = {5, 25};
  int k = 0;
  for (auto _ : state) {
    WhatIfSettings s = panel.settings();
    s.ddp.setBucketCapMb(caps[k++ % 2]);
    panel.setSettings(s);
    waitShown();
    if (!(panel.current() && panel.current()->settings == s)) {
      state.SkipWithError("result not shown");
      return;
    }
    state.SetIterationTime(panel.lastLatencyMs() / 1e3);
  }
  state.counters["world_size"] = panel.current()->layout.worldSize();
  state.counters["simulate_ms"] = static_cast<double>(panel.current()->simulateNs) / 1e6;
}
BENCHMARK(BM_WhatIfChangeToRepaint)->Unit(benchmark::kMillisecond)->UseManualTime();

std::filesystem::path torchRunDir() {
  return std::filesystem::temp_directory_path() /
         ("ddpscope_gui_bench_torch_" + std::to_string(::getpid()));
}

// torchRunDir() holding the per-rank fixtures; its files in rank order.
const std::vector<std::string>& torchRunFiles() {
  static std::vector<std::string> files;
  if (!files.empty()) return files;
  const std::filesystem::path dir = torchRunDir();
  std::filesystem::create_directories(dir);
  for (const char* name : {"ddp_gloo_rank0.json.gz", "ddp_gloo_rank1.json.gz"}) {
    std::filesystem::copy_file(std::filesystem::path(DDPSCOPE_TEST_DATA_DIR) / "torch" / name,
                               dir / name, std::filesystem::copy_options::overwrite_existing);
    files.push_back((dir / name).string());
  }
  return files;
}

void BM_OpenTorchRun(benchmark::State& state) {
  const std::vector<std::string>& files = torchRunFiles();
  const QString dir = QString::fromStdString(torchRunDir().string());
  int ranks = 0;
  size_t spans = 0;
  for (auto _ : state) {
    if (state.range(0) == 0) {
      auto timeline = importKinetoTraces(files);
      if (!timeline.isOk()) {
        state.SkipWithError(timeline.status().message().c_str());
        return;
      }
      ranks = timeline->rankCount();
      spans = 0;
      for (const auto& rank : timeline->ranks()) {
        for (const auto& lane : rank.lanes) spans += lane.spans.size();
      }
    } else {
      auto runs = loadTraces({dir});
      if (!runs.isOk() || runs->size() != 1) {
        state.SkipWithError(runs.isOk() ? "not one run" : runs.status().message().c_str());
        return;
      }
      ranks = runs->front().document->timeline().rankCount();
      spans = runs->front().document->spanCount();
    }
  }
  if (ranks != static_cast<int>(files.size())) state.SkipWithError("wrong rank count");
  state.counters["ranks"] = ranks;
  state.counters["spans"] = static_cast<double>(spans);
  state.SetLabel(state.range(0) == 0 ? "importKinetoTraces" : "loadTraces (GUI)");
}
BENCHMARK(BM_OpenTorchRun)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ignored;
  std::filesystem::remove(benchTracePath(), ignored);
  std::filesystem::remove_all(torchRunDir(), ignored);
  return 0;
}
