// The workload a simulation assumes, stated the same way by every command that simulates
// (simulate, sweep, replay, the GUI's what-if) and recorded in the trace metadata: what the
// step time is the time *of*.
//
// describeWorkload() (ddp_simulator.h: it needs SimOptions) gathers it from the model, layout,
// options and compute model;
// workloadText() is the block commands print, workloadJson() the "workload" object of their
// --json output (keys below), and workloadMetadata() the flat trace-metadata form (the DDP
// settings under ddp/ddp_settings.h's canonical keys, so replay reads them back).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "ddp/ddp_config.h"
#include "sim/engine/compile_mode.h"

namespace ddpscope::sim {

struct Workload {
  std::string model;        // "gpt2-small"
  std::string modelSource;  // "zoo:gpt2-small", "builder:gpt2:layers=2,...", a file path
  int64_t parameters = 0;
  int parameterTensors = 0;
  int64_t gradientBytes = 0;  // every parameter's gradient, in the parameters' dtype
  int64_t batchPerRank = 0;
  int64_t globalBatch = 0;
  int64_t seqLen = 0;     // 0: the model has no sequence dimension
  int64_t imageSize = 0;  // 0: not an image model
  std::string dtype;      // compute dtype
  std::string compute;    // where layer times come from (ComputeModel::describe)
  std::string optimizer;  // what the optimizer step assumes (ComputeModel::optimizer)
  std::string strategy;   // "DistributedDataParallel" or "DataParallel"
  ddp::DdpConfig ddp;
  CompileMode compile = CompileMode::kNone;  // torch.compile (compile_mode.h)
  int compiledGraphs = 0;                    // compiled forward graphs (0: eager or unknown)
  std::string cluster;
  int nodes = 1;
  int gpusPerNode = 1;
  int worldSize = 1;
};

// "workload (what the numbers assume):\n  model  ...\n  inputs ...\n ..." (ends with '\n').
std::string workloadText(const Workload& workload);
// {"model", "model_source", "parameters", "parameter_tensors", "gradient_bytes",
//  "batch_per_rank", "global_batch", "seq_len", "image_size", "dtype", "compute", "optimizer",
//  "strategy", "ddp": {canonical DDP keys}, "compile", "compiled_graphs", "cluster", "nodes",
//  "gpus_per_node", "world_size"}
nlohmann::json workloadJson(const Workload& workload);
// The same keys flat (the DDP settings inline), for trace metadata; "compile" and
// "compiled_graphs" only for a compiled model.
nlohmann::json workloadMetadata(const Workload& workload);

}  // namespace ddpscope::sim
