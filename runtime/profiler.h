// Profiler: one rank's timeline of a real training run, and the merge of all ranks' timelines.
//
// Lanes of every rank (tid = index, in this order):
//   0 "compute"    kCompute  forward / backward spans per layer (LayerObserver: host-timed
//                            Begin/End pairs, or device-timed onLayerSpan), optimizer
//   1 "comm"       kComm     every recorded collective, timed by the comm thread (start = when
//                            it enters the library call, end = when the call returned), with
//                            args bucket / bytes / iteration
//   2 "ddp"        kHost     the training thread's DDP work: "forward" / "backward" windows,
//                            bucket copies (kCopy, args bucket/param/bytes), finalize (the wait
//                            for the buckets and the copy back), rebuild, buffer broadcasts
//   3 "iterations" kHost     ProfilerStep#N markers (Timeline::addIteration)
// Spans are added from the training thread and the comm thread: a mutex guards the track.
//
// Bounded memory (long runs): with setRetainedIterations(K) the profiler is a ring buffer of
// the last K iterations. When iteration i ends (addIteration), spans that start before
// iteration i-K+1 began are dropped from the front of each lane (O(dropped)); snapshot() also
// leaves out any such span still queued behind a newer one, so the track holds exactly the
// spans of the last K iterations (and nothing recorded before them). Memory is then
// O(K x spans per iteration) however long the run; K = 0 keeps everything. A ring buffer
// rather than streaming to disk: the merged trace needs every rank's spans on rank 0 with
// clock offsets applied, and the steady state the tool asks about is the recent iterations.
// Times are the process's steady clock; clockOffset (rank 0's clock − ours, measured at start
// with a barrier) is added when the track is exported, so merged ranks share rank 0's clock.
//
// The merge: every rank encodes its track in a compact binary form (encodeRankTrack), rank 0
// gathers the blobs (one MPI_Gatherv) and decodes them into one Timeline, pid = rank.
// summarize() computes the per-iteration step time, forward, backward, comm, exposed comm and
// overlap % (traces::computeOverlap, the HTA definition) and writes the summary JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/nanos.h"
#include "base/status.h"
#include "runtime/comm.h"
#include "runtime/graph/trainable_model.h"
#include "traces/timeline.h"

namespace ddpscope::runtime {

enum class ProfLane : int { kCompute = 0, kComm = 1, kDdp = 2, kIterations = 3 };

class Profiler final : public LayerObserver, public CommObserver {
 public:
  // `layerNames` names the spans of LayerObserver events (index = layer index).
  Profiler(int rank, std::vector<std::string> layerNames, std::function<Nanos()> clock);

  Nanos now() const { return m_clock(); }
  int rank() const { return m_rank; }
  // Spans are dropped while disabled (e.g. during warm-up when asked to).
  void setEnabled(bool enabled);
  void setClockOffset(Nanos offset) { m_clockOffset = offset; }
  Nanos clockOffset() const { return m_clockOffset; }

  // LayerObserver (training thread).
  void onForwardBegin(int layerIndex) override;
  void onForwardEnd(int layerIndex) override;
  void onBackwardBegin(int layerIndex) override;
  void onBackwardEnd(int layerIndex) override;
  // Device-timed spans (device models, reported after the fact at endIteration): a layer's
  // span has the Begin/End pair's name and category ("h.0.mlp", "h.0.mlp (backward)");
  // onDeviceSpan's category follows its name ("optimizer ..." → optimizer, "loss ..." →
  // forward, "... (backward)" → backward, else compute). Both go to the compute lane.
  void onLayerSpan(int layerIndex, bool backward, Nanos start, Nanos end) override;
  void onDeviceSpan(const std::string& name, Nanos start, Nanos end) override;
  // CommObserver (comm thread).
  void onCollective(const CommTag& tag, int64_t bytes, Nanos start, Nanos end) override;

  void addSpan(ProfLane lane, std::string name, traces::Category category, Nanos start, Nanos end,
               traces::Args args = {});
  void addIteration(int64_t index, Nanos start, Nanos end);

  // Keep only the spans of the last `iterations` iterations (0: all, the default).
  void setRetainedIterations(int64_t iterations);
  int64_t retainedIterations() const;
  // Iterations whose spans were dropped so far (the first droppedIterations() iterations).
  int64_t droppedIterations() const;
  // Spans held now (all lanes), the quantity the ring buffer bounds.
  size_t spanCount() const;

  // A copy of this rank's track, shifted by the clock offset (rank id = rank()).
  traces::RankTrack snapshot() const;

 private:
  int m_rank;
  std::vector<std::string> m_layerNames;
  std::function<Nanos()> m_clock;
  Nanos m_clockOffset;
  bool m_enabled = true;
  Nanos m_forwardStart;   // training thread only
  Nanos m_backwardStart;  // training thread only
  const std::string& layerName(int layerIndex) const;
  void dropOldIterations();  // m_mutex held

  mutable std::mutex m_mutex;
  traces::RankTrack m_track;  // name, rank and lane names/kinds; the spans are in m_spans
  std::vector<std::deque<traces::Span>> m_spans;  // per lane, in insertion order
  std::deque<Nanos> m_iterationStarts;            // of the retained iterations, oldest first
  int64_t m_retainedIterations = 0;
  int64_t m_droppedIterations = 0;
  Nanos m_retainedFrom{INT64_MIN};  // spans starting earlier are dropped
};

// Compact binary encoding of a rank's track (little-endian host order; the gather happens
// between processes of one build). decode checks every length and reports truncation.
std::vector<std::byte> encodeRankTrack(const traces::RankTrack& track);
StatusOr<traces::RankTrack> decodeRankTrack(std::span<const std::byte> blob);

// One timeline from per-rank tracks (sorted by rank), with `metadata` as otherData; every span
// is shifted so that the earliest span of any rank starts at 0; lanes are sorted by time.
traces::Timeline mergeRankTracks(std::vector<traces::RankTrack> tracks, traces::Args metadata);

// Clock offset of this rank against rank 0 (add it to local times): barrier, read the clock,
// allgather the readings; repeated `rounds` times, the median kept. Collective.
StatusOr<Nanos> measureClockOffset(Communicator& comm, int rounds = 5);

// Gathers every rank's track on rank 0 and merges them. Collective; non-root ranks get an
// empty Timeline.
StatusOr<traces::Timeline> gatherTimeline(Communicator& comm, const Profiler& profiler,
                                          traces::Args metadata);

// Per-iteration figures of rank `rankId` plus the median step time, from a merged timeline.
struct IterationSummary {
  int64_t index = 0;
  Nanos step;
  Nanos forward;
  Nanos backward;
  Nanos comm;
  Nanos exposedComm;
  double overlapPercent = 0;
};
struct RunSummary {
  std::vector<IterationSummary> iterations;  // measured iterations (after warm-up)
  Nanos medianStep;
  Nanos medianForward;
  Nanos medianBackward;
  Nanos medianComm;
  Nanos medianExposedComm;
  double overlapPercent = 0;  // over the measured iterations, all ranks (comm-weighted)
  struct Rank {
    int rank = 0;
    double overlapPercent = 0;
    Nanos comm;
    Nanos exposedComm;
  };
  std::vector<Rank> ranks;
};
// Iterations with index <= warmup are left out of the medians (all are kept if none remain).
// Step/forward/backward of an iteration are the maximum over ranks (the slowest rank sets the
// pace); comm and exposed comm are rank 0's.
RunSummary summarize(const traces::Timeline& timeline, int64_t warmup);
// The summary as JSON text (key "median_step_ms", "iterations": [...], "ranks": [...]);
// `extra` fields (model, world_size, ...) are added at the top level.
std::string summaryToJson(const RunSummary& summary, const traces::Args& extra);

}  // namespace ddpscope::runtime
