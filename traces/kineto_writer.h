// Writes a ddpscope timeline (simulated or replayed) as PyTorch profiler (Kineto) traces, one
// file per rank, so that the trace tools of the PyTorch ecosystem read them as they read a
// profiler trace: Holistic Trace Analysis (TraceAnalysis(trace_dir=...)), TraceLens, Perfetto.
// docs/spec/trace-formats.md describes both formats; this is the mapping:
//
//   file         {"schemaVersion": 1, "distributedInfo": {"backend": B, "rank": R,
//                 "world_size": W}, "traceEvents": [...], "traceName", "displayTimeUnit": "ms"}
//                 W = the timeline's "world_size" metadata (else its rank count), B its
//                 "backend" (a runtime trace: mpi or nccl; else nccl). A runtime trace on CPUs
//                 is written the same way: its compute lane as a GPU stream and its MPI
//                 collectives under NCCL kernel names, because HTA knows communication only by
//                 those names; distributedInfo.backend says what really ran.
//   host         pid = kHostPid, tid = kHostTid (the host lane named kAutogradThreadLane:
//                 kKinetoAutogradTid, "thread 1001 (autograd)"); ProfilerStep#N
//                 ("user_annotation") from the rank's kIteration spans.
//   GPU          pid = the rank's local GPU (rank mod the "gpus_per_node" metadata, else 0);
//                 tid = the stream: kComputeStream for compute lanes, kCommStream for
//                 communication lanes (PyTorch's default stream and an NCCL stream).
//   kernels      forward / backward / optimizer / compute spans: cat "kernel", named
//                 "ddpscope::<category> <span name>" (never an NCCL, memcpy, memset, dma or
//                 Sync name: HTA classifies kernels by name, and these are computation);
//                 collectives: cat "kernel", NCCL's device-kernel naming,
//                 "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long,
//                 ncclWork*)" (algorithm and protocol from the span's args, RING / SIMPLE when
//                 absent), with "Collective name" and the span's bytes;
//                 copies (kCopy): cat "gpu_memcpy", "Memcpy DtoD (Device -> Device)";
//                 other device spans: cat "gpu_user_annotation" without a stream (HTA's device
//                 rows are the events with a stream, so they count as neither, as in ddpscope).
//                 Every device event has args device, stream and a unique correlation.
//   launches     one host "cuda_runtime" event per device event (cudaLaunchKernel, or
//                 cudaMemcpyAsync for a copy) with the same correlation and of zero length: at
//                 the span's kArgLaunchNs on the thread of its kArgLaunchLane where the timeline
//                 records them (a simulation whose host runs ahead: the launch delay HTA's
//                 kernel launch statistics read is how far the host ran ahead), else at the
//                 device event's start on the main thread (HTA assigns kernels to iterations,
//                 and drops the last profiled step's, through these launches).
// So HTA's get_comm_comp_overlap on the written files and `ddpscope overlap` on the same files
// agree (tests/traces/kineto_writer_test.cpp, with HTA's numbers recorded by
// tests/data/hta/record_hta.py).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "traces/timeline.h"

namespace ddpscope::traces {

inline constexpr int kKinetoHostPid = 1000;
inline constexpr int kKinetoHostTid = 1000;
inline constexpr int kKinetoAutogradTid = 1001;
inline constexpr int kKinetoComputeStream = 7;
inline constexpr int kKinetoCommStream = 20;

// Writes rank index `rankIndex` of `timeline` to `path` (gzip when it ends in ".gz").
Status writeKinetoTrace(const Timeline& timeline, int rankIndex, const std::string& path);

// The path of rank `rank`'s file when a trace is written one file per rank: "run.json" →
// "run.rank3.json", "out/run.json.gz" → "out/run.rank3.json.gz", "run" → "run.rank3".
std::string perRankTracePath(const std::string& path, int rank);

}  // namespace ddpscope::traces
