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
// is computed in double and rounded to ns (half away from zero, as llround). Same inputs and seed
// → the same timeline.
//
// Contention: runKernel implements the model stated in ddp_simulator.h by integrating a kernel's
// work piecewise over the rank's busy intervals. A kernel that runs before the rank's issue of
// collective k ends before its span of k begins, so the collectives already timed (< k) are all it
// can overlap.
//
// Complexity: O(L + P + C) per iteration and simulated rank (L layers, P parameters, C
// collectives): collective ends and a rank's busy starts never decrease, so the first collective a
// kernel may overlap (RankState::busyIdx) only moves forward; recording a trace adds one span per
// op. Memory: 48 B of state per rank plus the busy starts, 8 B per (collective, rank) of the
// iteration, stored collective-major so that the loop over ranks at collective k reads rows k−1,
// k−2, … sequentially (rank-major rows cost a cache miss per rank and collective at 65,536 ranks).
//
// Lanes: in a metrics-only run the ranks after rank 0 are replayed kLanes at a time when they
// share a script (advanceLanes): one op, then the same op on the next rank, and so on. Each
// rank's times are computed exactly as alone (same operations in the same order on its own
// values); only the interleaving changes, which lets the processor overlap the ranks'
// latency-bound chains (65,536 ranks of gpt2-xl: 3.9 → 2.9 s of CPU on the team's EPYC).
//
// Invariants (the output's are listed in ddp_simulator.h): a rank's script stops exactly at its
// issue of the collective being timed, and a wait only names a collective already timed (both
// checked); busyIdx never moves back within an iteration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "models/model_spec.h"
#include "sim/engine/accounting.h"
#include "sim/engine/chunk_pool.h"
#include "sim/engine/ddp_simulator.h"
#include "sim/engine/script.h"
#include "traces/timeline.h"

namespace ddpscope::sim::internal {

// std::llround for the replayer's per-kernel times, inline: libm's llround is a call that cost a
// quarter of an all-ranks run's instructions. Exact for every finite |x| < 2^63: the truncation t
// is exact, x − t is exact (Sterbenz; for |x| ≥ 2^52, x is an integer and x − t = 0), and a
// fraction of exactly ±0.5 rounds away from zero.
inline int64_t roundHalfAwayFromZero(double x) {
  const auto t = static_cast<int64_t>(x);
  const double fraction = x - static_cast<double>(t);
  return t + (fraction >= 0.5) - (fraction <= -0.5);
}

// What advanceRank reads besides the rank's own state, hoisted into one place so the per-op loop
// keeps it in registers.
struct KernelContext {
  const int64_t* collEnd;  // ends of the collectives timed so far
  const int64_t* busyCol;  // the rank's column of busyStart: busyCol[k * stride]
  size_t stride;           // ranks per busyStart row
  // 1 + the compute slowdown while collective k runs (the same for every k with a flat
  // contention); read only when `contended`.
  const double* collSlowdown;
  bool contended;  // false: no collective slows compute (every kernel runs at full speed)
  int known;       // collectives [0, known) are timed
};

// Below 2^53 ns (104 days) int64 ↔ double conversions and sums of two times are exact, so the
// integer fast paths of kernelEnd decide exactly as the double arithmetic of its loop would.
constexpr int64_t kExactDoubleNs = int64_t{1} << 53;
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// The rank's first busy interval that may still overlap its cursor: collective idx, the first
// whose end is after the cursor. Its bounds are kept in the forms the fast paths compare with;
// without contention (or when idx == known) there is nothing to overlap and every bound is kNever.
struct BusyWindow {
  int32_t idx = 0;
  int64_t endNs = kNever;         // the collective's end (seek when a kernel starts at or after it)
  int64_t clearUntilNs = kNever;  // a kernel ending by then is not slowed: min(begin, 2^53 − 1)
  int64_t insideFromNs = kNever;  // a kernel starting at or after it starts inside the interval
                                  // (kNever when the end is past the exact range)
  double endDouble = 0;           // endNs as double
  double slowdown = 1.0;          // collSlowdown[idx]
};

// The contention model itself (ddp_simulator.h "Contention"): a kernel of `workNs` starting at
// `startNs` integrated piecewise in double over the rank's busy intervals of collectives
// [firstIdx, known) — firstIdx being the first collective that ends after `startNs` — and rounded
// to ns. kernelEnd's fast paths must agree with it to the bit (tested).
inline int64_t integrateKernel(const KernelContext& c, int32_t firstIdx, int64_t startNs,
                               int64_t workNs) {
  const int64_t endNs = startNs + workNs;
  if (workNs == 0 || !c.contended) return endNs;
  double pos = static_cast<double>(startNs);
  double remaining = static_cast<double>(workNs);
  bool slowed = false;
  for (int k = firstIdx; k < c.known; ++k) {
    const double busyEnd = static_cast<double>(c.collEnd[k]);
    if (busyEnd <= pos) continue;
    const double busyBegin = static_cast<double>(c.busyCol[static_cast<size_t>(k) * c.stride]);
    if (busyBegin >= pos + remaining) break;
    slowed = true;
    if (busyBegin > pos) {
      remaining -= busyBegin - pos;
      pos = busyBegin;
    }
    const double slowdown = c.collSlowdown[k];
    const double capacity = (busyEnd - pos) / slowdown;  // work done inside the interval
    if (remaining <= capacity) {
      pos += remaining * slowdown;
      remaining = 0;
      break;
    }
    remaining -= capacity;
    pos = busyEnd;
  }
  if (!slowed) return endNs;
  return roundHalfAwayFromZero(pos + remaining);
}

// Moves the window to the first collective that ends after `startNs`.
inline void seekBusyWindow(const KernelContext& c, BusyWindow& w, int64_t startNs) {
  if (!c.contended) return;  // the window stays empty
  while (w.idx < c.known && c.collEnd[w.idx] <= startNs) ++w.idx;
  if (w.idx < c.known) {
    const int64_t beginNs = c.busyCol[static_cast<size_t>(w.idx) * c.stride];
    w.endNs = c.collEnd[w.idx];
    w.clearUntilNs = std::min(beginNs, kExactDoubleNs - 1);
    w.insideFromNs = w.endNs < kExactDoubleNs ? beginNs : kNever;
    w.endDouble = static_cast<double>(w.endNs);
    w.slowdown = c.collSlowdown[w.idx];
  } else {
    w.endNs = w.clearUntilNs = w.insideFromNs = kNever;
  }
}

// End of a kernel of `workNs` starting at `startNs`, slowed by `slowdown` inside the rank's busy
// intervals of collectives [w.idx, known) (ddp_simulator.h "Contention"). The loop integrates the
// work piecewise in double; the two fast paths in front of it are the loop's own first step for
// the common cases (the kernel ends before the next busy interval; it starts and ends inside one),
// decided with the same comparisons, so the result is the same to the bit.
inline int64_t kernelEnd(const KernelContext& c, BusyWindow& w, int64_t startNs, int64_t workNs) {
  if (startNs >= w.endNs) seekBusyWindow(c, w, startNs);
  const int64_t endNs = startNs + workNs;
  if (endNs <= w.clearUntilNs) return endNs;
  if (startNs >= w.insideFromNs) {
    // Starts inside interval idx: the loop's first step, where busyBegin ≤ pos < busyEnd (a
    // kernel of 0 ns ends where it starts, as the loop's early return has it).
    const double pos = static_cast<double>(startNs);
    const double remaining = static_cast<double>(workNs);
    const double capacity = (w.endDouble - pos) / w.slowdown;
    if (remaining <= capacity) return roundHalfAwayFromZero(pos + remaining * w.slowdown);
  }
  return integrateKernel(c, w.idx, startNs, workNs);
}

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
  // `threads` > 1 (metrics only: `timeline` null) replays contiguous chunks of ranks on that many
  // threads between the collectives; the result does not depend on it.
  Replayer(const models::ModelSpec& model, int numRanks, double contention,
           traces::Timeline* timeline, const HostModel& host = {}, int smCount = 0,
           int threads = 1);

  // Per-rank compute-time factors for the next iteration (1.0 unless set).
  std::vector<double>& scales() { return m_scale; }

  // Times one iteration; scriptOf(r) gives rank r's script (all with the same collectives).
  template <typename ScriptOf>
  void runIteration(int64_t iteration, ScriptOf scriptOf, const Script& reference,
                    RankZeroRecorder& recorder, IterationSummary& out) {
    m_iteration = iteration;
    const int numCollectives = static_cast<int>(reference.collectives.size());
    m_collEnd.assign(static_cast<size_t>(numCollectives), 0);
    m_collSlowdown.assign(static_cast<size_t>(numCollectives), m_slowdown);
    // Every entry is written (as the rank's issue) before it is read.
    m_busyStart.resize(static_cast<size_t>(numCollectives) * static_cast<size_t>(m_numRanks));
    if (m_timeline) {
      m_bucketHook.assign(static_cast<size_t>(m_numRanks) * m_model.params.size(), 0);
    }
    recorder.beginIteration();
    for (RankState& rank : m_ranks) {
      rank.pos = 0;
      rank.busyIdx = 0;
      rank.iterStart = rank.cursor;
      rank.host = rank.cursor;  // the step syncs
    }
    m_hostStallNs = 0;
    for (int k = 0; k < numCollectives; ++k) {
      int64_t* busy = busyRow(k);
      const int64_t arrivalNs = maxOverRankChunks([&](int begin, int end) {
        int64_t chunkArrivalNs = 0;
        for (int r = begin; r < end;) {
          const int lanes = advance(r, end, scriptOf, k, k, recorder, busy + r);
          for (int l = 0; l < lanes; ++l) chunkArrivalNs = std::max(chunkArrivalNs, busy[r + l]);
          r += lanes;
        }
        return chunkArrivalNs;
      });
      const CollectiveDesc& desc = reference.collectives[static_cast<size_t>(k)];
      const int64_t prevEndNs = m_commFreeNs;
      const int64_t startNs = std::max(arrivalNs, prevEndNs);
      const int64_t endNs = startNs + desc.estimate->time.count();
      if (m_smCount > 0) {
        m_collSlowdown[static_cast<size_t>(k)] =
            1.0 + collectiveContention(m_slowdown - 1.0, m_smCount, desc.estimate->ctas);
      }
      m_collEnd[static_cast<size_t>(k)] = endNs;
      m_commFreeNs = endNs;
      for (int r = 0; r < m_numRanks; ++r) {
        // From here on row k holds the rank's busy start of collective k (its issue or the end
        // of collective k−1, whichever is later): what contention and its comm span use.
        const int64_t spanStart = std::max(busy[r], prevEndNs);
        busy[r] = spanStart;
        if (r == 0) recorder.add(desc.category(), Nanos(spanStart), Nanos(endNs - spanStart));
        if (m_timeline) emitCollective(r, k, desc, spanStart, endNs);
        RankState& rank = m_ranks[static_cast<size_t>(r)];
        if (desc.blocking) rank.cursor = std::max(rank.cursor, endNs);
        ++rank.pos;  // past the issue op
      }
      out.collectiveSequence.push_back(sequenceEntry(desc.sequenceKind(), desc.bytes));
    }
    const int64_t maxStepNs = maxOverRankChunks([&](int begin, int end) {
      int64_t chunkMaxStepNs = 0;
      for (int r = begin; r < end;) {
        int64_t unused[kLanes];
        const int lanes = advance(r, end, scriptOf, -1, numCollectives, recorder, unused);
        for (const int last = r + lanes; r < last; ++r) {
          RankState& rank = m_ranks[static_cast<size_t>(r)];
          // Every collective of the step has ended before the step does.
          if (numCollectives > 0) rank.cursor = std::max(rank.cursor, m_collEnd.back());
          chunkMaxStepNs = std::max(chunkMaxStepNs, rank.cursor - rank.iterStart);
          if (m_timeline) {
            m_timeline->addIteration(r, iteration, Nanos(rank.iterStart),
                                     Nanos(rank.cursor - rank.iterStart));
          }
        }
      }
      return chunkMaxStepNs;
    });
    out.index = iteration;
    out.collectives = numCollectives;
    out.synced = reference.synced;
    out.rebuilt = reference.rebuilt;
    recorder.finishIteration(Nanos(m_ranks[0].iterStart), Nanos(m_ranks[0].cursor), out);
    out.maxRankStepTime = Nanos(maxStepNs);
    out.ddpHost = scriptOf(0).ddpHost;
    out.hostWork = scriptOf(0).hostWork;
    out.hostStall = Nanos(m_hostStallNs);
  }

 private:
  // Runs chunkFn(begin, end) over contiguous chunks of the ranks (one per thread; rank 0 in the
  // calling thread's chunk) and returns the largest value a chunk returned.
  template <typename ChunkFn>
  int64_t maxOverRankChunks(ChunkFn chunkFn) {
    if (!m_pool) return chunkFn(0, m_numRanks);
    const int chunks = m_pool->threads();
    m_chunkResult.assign(static_cast<size_t>(chunks), 0);
    m_pool->run([&](int c) {
      const int begin = static_cast<int>(int64_t{m_numRanks} * c / chunks);
      const int end = static_cast<int>(int64_t{m_numRanks} * (c + 1) / chunks);
      m_chunkResult[static_cast<size_t>(c)] = chunkFn(begin, end);
    });
    return *std::max_element(m_chunkResult.begin(), m_chunkResult.end());
  }

  // A rank's replay state, 48 bytes in one array: the lockstep loop over ranks touches each
  // rank's state once per collective.
  struct RankState {
    int64_t cursor = 0;     // compute stream free at
    int64_t host = 0;       // host thread free at (== cursor when !m_hostAhead)
    int64_t hook = 0;       // end of the last backward kernel (hook time)
    int64_t iterStart = 0;  // this iteration's start
    int32_t pos = 0;        // next op of the current script
    int32_t busyIdx = 0;    // first collective whose end may be after the cursor
  };

  // Row k of m_busyStart: one entry per rank (k-major, so the lockstep loop over ranks walks it
  // sequentially).
  int64_t* busyRow(int k) {
    return m_busyStart.data() + static_cast<size_t>(k) * static_cast<size_t>(m_numRanks);
  }
  // Ranks replayed together by advanceLanes: their ops' time chains are independent, so the
  // processor overlaps them (one rank's chain — int64 → double → rounded int64 per kernel — is
  // latency bound).
  static constexpr int kLanes = 4;

  // Runs rank r's script — and, when they can go with it, those of ranks r+1 … (at most kLanes
  // in all, all < end, all with the same script, none of them rank 0 or traced) — until the issue
  // op of collective `stopAt` (−1: to the end). Writes each rank's issue time of `stopAt` (0 when
  // −1) to launchOut[0 …] and returns how many ranks it ran.
  template <typename ScriptOf>
  int advance(int r, int end, ScriptOf& scriptOf, int stopAt, int known, RankZeroRecorder& recorder,
              int64_t* launchOut) {
    const Script& script = scriptOf(r);
    int lanes = 1;
    if (r != 0 && !m_timeline && end - r >= kLanes) {
      while (lanes < kLanes && &scriptOf(r + lanes) == &script) ++lanes;
      if (lanes < kLanes) lanes = 1;
    }
    if (lanes == kLanes) {
      advanceBatch(r, script, stopAt, known, recorder, launchOut);
    } else {
      launchOut[0] = advanceOne(r, script, stopAt, known, recorder);
    }
    return lanes;
  }
  // One rank (advance's rank r alone); returns its issue time of `stopAt` (0 when −1).
  int64_t advanceOne(int r, const Script& script, int stopAt, int known,
                     RankZeroRecorder& recorder);
  // Ranks r … r + kLanes − 1, none of them rank 0, no trace.
  void advanceBatch(int r, const Script& script, int stopAt, int known, RankZeroRecorder& recorder,
                    int64_t* launchOut);
  // The replay of kN ranks with the same script in lockstep over its ops; each rank's times are
  // those it would get alone. kScaled: some rank's scale is not 1 (a scale of 1 then changes
  // nothing: round(w · 1.0) = w); kDetail (kN = 1 only): rank 0 (recorded for the summary) or a
  // trace is written; the other ranks of a metrics-only run take the lean instantiations.
  template <bool kHostAhead, bool kScaled, bool kDetail, int kN>
  void advanceLanes(int r, const Script& script, int stopAt, int known, RankZeroRecorder& recorder,
                    int64_t* launchOut);
  size_t bucketHookIndex(int r, int bucket) const {
    return static_cast<size_t>(r) * m_model.params.size() + static_cast<size_t>(bucket);
  }
  // The rank's host lanes (ddp_simulator.h "Host"): the main thread and autograd's thread.
  static constexpr int kMainLane = 2;
  static constexpr int kAutogradLane = 3;
  // Which host thread issues op: the backward's kernels, DDP's hooks, copies, bucket collectives
  // and waits run on autograd's thread; the forward, the optimizer and the step's own work on
  // the main thread.
  static int hostLaneOf(const Op& op);
  // Writes the host span of op's DDP host cost, starting at `startNs` on rank r's host.
  void emitHostSpan(int r, const Op& op, int64_t startNs);
  // `launchNs` >= 0: when the host finished launching the kernel (the host runs ahead).
  void emitKernel(int r, const Op& op, traces::Category category, int64_t startNs, int64_t endNs,
                  int64_t launchNs);
  void emitCollective(int r, int k, const CollectiveDesc& desc, int64_t startNs, int64_t endNs);

  const models::ModelSpec& m_model;
  int m_numRanks;
  double m_slowdown;  // 1 + the flat contention
  int m_smCount;      // > 0: per-collective SM contention (m_collSlowdown)
  traces::Timeline* m_timeline;
  bool m_hostAhead;
  bool m_hostPerOp;  // the host pays per op (spans of layer dispatch on the host lane)
  int64_t m_iteration = 0;
  int64_t m_commFreeNs = 0;
  uint64_t m_flowId = 0;
  std::unique_ptr<ChunkPool> m_pool;   // null: one thread
  std::vector<int64_t> m_chunkResult;  // per chunk of maxOverRankChunks
  std::vector<RankState> m_ranks;
  std::vector<double> m_scale;        // per rank: compute-time factor this iteration
  std::vector<int64_t> m_bucketHook;  // trace only: [rank × P] hook time of a bucket's last copy
  // Trace only, per rank: when its host finished launching the collective being timed (−1: the
  // host is the stream, nothing is launched ahead).
  std::vector<int64_t> m_issueHost;
  int64_t m_hostStallNs = 0;
  // Per collective of the iteration.
  std::vector<int64_t> m_collEnd;
  std::vector<double> m_collSlowdown;  // 1 + the compute slowdown while collective k runs
  // [collective × rank]: while collective k is timed, row k holds each rank's issue time; once it
  // is timed, the rank's busy start of k: its NCCL kernel runs from its own issue (or the end of
  // collective k−1, whichever is later) to the collective's end.
  std::vector<int64_t> m_busyStart;
};

}  // namespace ddpscope::sim::internal
