// Internal to sim/engine (not a public API; include only from sim/engine/*.cpp): the timing half
// of the DDP simulator. Replayer gives the iteration scripts of script.h start and end times on
// every simulated rank, writes the spans to the timeline and hands rank 0's to the
// RankZeroRecorder.
//
// Algorithm: dependency propagation in lockstep over the iteration's collectives; there is no
// event queue. Each rank has a compute-stream cursor (when its stream is free). For collective
// k = 0, 1, …: every rank, in rank order, runs its script in stream order up to its issue of k
// (a kernel starts at the cursor, host work advances it unslowed, a wait moves it to the awaited
// collective's end); collective k starts at max(latest issue over ranks, end of collective k−1)
// (one NCCL stream per process group) and lasts its CommModel estimate; a blocking collective
// (broadcasts, SyncBN) moves every rank's cursor to its end. Then every rank runs to the end of
// its script, and its iteration ends at max(cursor, end of the last collective). Rank r's comm
// span of k runs from max(its own issue, end of collective k−1) to the collective's end.
//
// Order rules: the order of work is fixed by (collective index, rank, position in the script),
// never by times, so nothing competes and no tie needs breaking: a rank's ops run in stream
// order, collectives run strictly in issue order, ranks in rank order, and spans are added to the
// timeline in that order. Times are int64 ns; a kernel scaled by jitter or slowed by contention
// is computed in double and rounded to ns (llround). Same inputs and seed → the same timeline.
//
// Contention: runKernel implements the model stated in ddp_simulator.h by integrating a kernel's
// work piecewise over the rank's busy intervals. A kernel that runs before the rank's issue of
// collective k ends before its span of k begins, so the collectives already timed (< k) are all it
// can overlap.
//
// Complexity: O(L + P + C) per iteration and simulated rank (L layers, P parameters, C
// collectives) with flat per-rank arrays: collective ends and a rank's busy starts never
// decrease, so the first collective a kernel may overlap (m_busyIdx) only moves forward;
// recording a trace adds one span per op.
//
// Invariants (the output's are listed in ddp_simulator.h): a rank's script stops exactly at its
// issue of the collective being timed, and a wait only names a collective already timed (both
// checked); m_busyIdx never moves back within an iteration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "models/model_spec.h"
#include "sim/engine/accounting.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/engine/script.h"
#include "traces/timeline.h"

namespace ddpscope::sim::internal {

// Draws the compute-time factors of all-ranks mode as ddp_simulator.h defines them (jitter ×
// straggler slowdown): one uniform from std::mt19937_64(options.seed) per (rank, iteration), in
// rank order, whether or not there is jitter.
class ComputeJitter {
 public:
  ComputeJitter(const SimOptions& options, int numRanks);
  // Draws this iteration's factor of every rank into scales[0..numRanks).
  void draw(std::vector<double>& scales);

 private:
  std::mt19937_64 m_rng;
  double m_jitter;                        // fraction: 0.05 = ±5 %
  std::vector<double> m_stragglerFactor;  // per rank (all-ranks mode only)
};

class Replayer {
 public:
  // Adds ranks 0..numRanks−1 with their compute, comm and host lanes to `timeline` (may be null:
  // metrics only). `contention` is c: compute runs 1 + c times slower while a collective is in
  // flight on the rank.
  // `host`: the host thread's model (ddp_simulator.h "Host"); its costs are in the scripts' ops
  // (Op::hostNs), whether the host runs ahead is read here.
  // `smCount` > 0: collective k slows compute by collectiveContention(contention, smCount, its
  // estimate's CTAs) instead of `contention` (NCCL's CTAs hold SMs; ddp_simulator.h).
  Replayer(const models::ModelSpec& model, int numRanks, double contention,
           traces::Timeline* timeline, const HostModel& host = {}, int smCount = 0);

  // Per-rank compute-time factors for the next iteration (1.0 unless set).
  std::vector<double>& scales() { return m_scale; }

  // Times one iteration; scriptOf(r) gives rank r's script (all with the same collectives).
  template <typename ScriptOf>
  void runIteration(int64_t iteration, ScriptOf scriptOf, const Script& reference,
                    RankZeroRecorder& recorder, IterationSummary& out) {
    m_iteration = iteration;
    const int numCollectives = static_cast<int>(reference.collectives.size());
    m_numCollectives = numCollectives;
    m_collEnd.assign(static_cast<size_t>(numCollectives), 0);
    m_collSlowdown.assign(static_cast<size_t>(numCollectives), m_slowdown);
    m_prevEnd.assign(static_cast<size_t>(numCollectives), 0);
    m_launch.assign(static_cast<size_t>(numCollectives) * static_cast<size_t>(m_numRanks), 0);
    if (m_timeline) {
      m_bucketHook.assign(static_cast<size_t>(m_numRanks) * m_model.params.size(), 0);
    }
    recorder.beginIteration();
    for (int r = 0; r < m_numRanks; ++r) {
      m_pos[static_cast<size_t>(r)] = 0;
      m_busyIdx[static_cast<size_t>(r)] = 0;
      m_iterStart[static_cast<size_t>(r)] = m_cursor[static_cast<size_t>(r)];
      m_host[static_cast<size_t>(r)] = m_cursor[static_cast<size_t>(r)];  // the step syncs
    }
    m_hostStallNs = 0;
    for (int k = 0; k < numCollectives; ++k) {
      int64_t arrivalNs = 0;
      for (int r = 0; r < m_numRanks; ++r) {
        advance(r, scriptOf(r), k, k, recorder);
        const int64_t launchNs = m_issueAt[static_cast<size_t>(r)];
        m_launch[launchIndex(r, k)] = launchNs;
        arrivalNs = std::max(arrivalNs, launchNs);
      }
      const CollectiveDesc& desc = reference.collectives[static_cast<size_t>(k)];
      const int64_t startNs = std::max(arrivalNs, m_commFreeNs);
      m_prevEnd[static_cast<size_t>(k)] = m_commFreeNs;
      const int64_t endNs = startNs + desc.estimate->time.count();
      if (m_smCount > 0) {
        m_collSlowdown[static_cast<size_t>(k)] =
            1.0 + collectiveContention(m_slowdown - 1.0, m_smCount, desc.estimate->ctas);
      }
      m_collEnd[static_cast<size_t>(k)] = endNs;
      m_commFreeNs = endNs;
      for (int r = 0; r < m_numRanks; ++r) {
        const int64_t spanStart = busyStart(r, k);
        if (r == 0) recorder.add(desc.category(), Nanos(spanStart), Nanos(endNs - spanStart));
        if (m_timeline) emitCollective(r, k, desc, spanStart, endNs);
        if (desc.blocking) {
          m_cursor[static_cast<size_t>(r)] = std::max(m_cursor[static_cast<size_t>(r)], endNs);
        }
        ++m_pos[static_cast<size_t>(r)];  // past the issue op
      }
      out.collectiveSequence.push_back(sequenceEntry(desc.sequenceKind(), desc.bytes));
    }
    int64_t maxStepNs = 0;
    for (int r = 0; r < m_numRanks; ++r) {
      advance(r, scriptOf(r), -1, numCollectives, recorder);
      int64_t& cursor = m_cursor[static_cast<size_t>(r)];
      // Every collective of the step has ended before the step does.
      if (numCollectives > 0) cursor = std::max(cursor, m_collEnd.back());
      const int64_t startNs = m_iterStart[static_cast<size_t>(r)];
      maxStepNs = std::max(maxStepNs, cursor - startNs);
      if (m_timeline)
        m_timeline->addIteration(r, iteration, Nanos(startNs), Nanos(cursor - startNs));
    }
    out.index = iteration;
    out.collectives = numCollectives;
    out.synced = reference.synced;
    out.rebuilt = reference.rebuilt;
    recorder.finishIteration(Nanos(m_iterStart[0]), Nanos(m_cursor[0]), out);
    out.maxRankStepTime = Nanos(maxStepNs);
    out.ddpHost = scriptOf(0).ddpHost;
    out.hostStall = Nanos(m_hostStallNs);
  }

 private:
  size_t launchIndex(int r, int k) const {
    return static_cast<size_t>(r) * static_cast<size_t>(m_numCollectives) + static_cast<size_t>(k);
  }
  // Rank r's NCCL kernel for collective k runs from its own issue (or the end of collective k−1,
  // whichever is later) to the collective's end.
  int64_t busyStart(int r, int k) const {
    return std::max(m_launch[launchIndex(r, k)], m_prevEnd[static_cast<size_t>(k)]);
  }

  // scaled and runKernel are on the per-op path. Declared inline (and defined in replayer.cpp,
  // next to advance(), their only caller) so the compiler can inline them into it; out of line
  // they cost ~3 % more instructions in sim_bench's BM_AllRanks4096.
  inline int64_t scaled(int r, int64_t workNs) const;
  // End of a kernel of `workNs` starting at `startNs` on rank r, slowed by m_slowdown inside the
  // rank's busy intervals of collectives [busyIdx, known).
  inline int64_t runKernel(int r, int64_t startNs, int64_t workNs, int known);
  // Runs rank r's script until the issue op of collective `stopAt` (−1: to the end).
  void advance(int r, const Script& script, int stopAt, int known, RankZeroRecorder& recorder);
  template <bool kHostAhead>
  void advanceRank(int r, const Script& script, int stopAt, int known, RankZeroRecorder& recorder);
  size_t bucketHookIndex(int r, int bucket) const {
    return static_cast<size_t>(r) * m_model.params.size() + static_cast<size_t>(bucket);
  }
  // Writes the host span of op's DDP host cost, starting at `startNs` on rank r's host.
  void emitHostSpan(int r, const Op& op, int64_t startNs);
  void emitKernel(int r, const Op& op, traces::Category category, int64_t startNs, int64_t endNs);
  void emitCollective(int r, int k, const CollectiveDesc& desc, int64_t startNs, int64_t endNs);

  const models::ModelSpec& m_model;
  int m_numRanks;
  double m_slowdown;  // 1 + the flat contention
  int m_smCount;      // > 0: per-collective SM contention (m_collSlowdown)
  traces::Timeline* m_timeline;
  bool m_hostAhead;
  int64_t m_iteration = 0;
  int m_numCollectives = 0;
  int64_t m_commFreeNs = 0;
  uint64_t m_flowId = 0;
  // Per rank.
  std::vector<int64_t> m_cursor;   // compute stream free at
  std::vector<int64_t> m_host;     // host thread free at (== m_cursor when !m_hostAhead)
  std::vector<int64_t> m_issueAt;  // when the rank issued the collective advance() stopped at
  std::vector<int> m_pos;          // next op of the current script
  std::vector<int> m_busyIdx;      // first collective whose end may be after the cursor
  std::vector<int64_t> m_hook;     // end of the last backward kernel (hook time)
  std::vector<int64_t> m_iterStart;
  std::vector<double> m_scale;        // compute-time factor this iteration
  std::vector<int64_t> m_bucketHook;  // trace only: [rank × P] hook time of a bucket's last copy
  int64_t m_hostStallNs = 0;
  // Per collective of the iteration.
  std::vector<int64_t> m_collEnd;
  std::vector<double> m_collSlowdown;  // 1 + the compute slowdown while collective k runs
  std::vector<int64_t> m_prevEnd;      // comm stream free before collective k
  std::vector<int64_t> m_launch;       // [rank × collective] issue times
};

}  // namespace ddpscope::sim::internal
