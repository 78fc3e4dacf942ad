// Zero-shot validation against published measurements: real PyTorch DDP jobs on GPU clusters
// (tests/data/published/ddp_iterations.json, each row with its source), simulated on the built-in
// cluster that describes the machine with the roofline compute model, nothing fitted.
//
// A row's published number becomes a step time: unit "s/iter" is one iteration; unit "img/s" is
// the throughput of all GPUs, so step = gpus x batch_per_gpu / throughput. The simulation: the
// zoo model, the cluster, `nodes` nodes x gpus/nodes ranks, batch_per_gpu per rank, the row's
// precision as the compute dtype, bucket_cap_mb when the row states one (else DDP's default,
// left unset), everything else DDP's defaults.
//
// Cap-to-cap: rows sharing a `comparison` differ only in bucket_cap_mb; for each pair (the
// smallest cap against each other cap) the sign of the published step-time difference is compared
// with the sign of the simulated one.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/cost/cluster.h"
#include "sim/cost/host_profile.h"

namespace ddpscope::sim::validate {

struct PublishedRow {
  std::string id;
  std::string model;    // zoo model
  std::string cluster;  // built-in cluster
  int gpus = 1;
  int nodes = 1;
  int batchPerGpu = 1;
  std::string precision;              // fp32 | tf32 | fp16 | bf16
  std::optional<double> bucketCapMb;  // null: not stated
  std::string unit;                   // "s/iter" | "img/s"
  double value = 0;                   // as published
  std::optional<std::string> comparison;
  std::optional<double> publishedDiffVsCap25Percent;
  std::string sourceUrl;
  std::string sourceWhere;
  double publishedStepMs() const;  // value as a step time (see above)
};

// Reads and checks the file (InvalidArgument naming file, row and field): the top-level keys
// description, fields, rows; per row the keys listed in the file's "fields", required ones
// present and typed, unit one of the two, value > 0, gpus a multiple of nodes, ids unique, a
// source_url starting with https://, a non-empty source_where.
StatusOr<std::vector<PublishedRow>> loadPublishedRows(const std::string& path);

struct ZeroShotRow {
  const PublishedRow* row = nullptr;
  double publishedMs = 0;
  double predictedMs = 0;
  double errorPercent = 0;  // 100 (predicted - published) / published
};

struct CapPair {
  std::string comparison;
  const ZeroShotRow* small = nullptr;  // the smaller cap
  const ZeroShotRow* large = nullptr;
  double publishedDiffPercent = 0;  // 100 (small - large) / large, published step times
  double predictedDiffPercent = 0;  // the same on the predictions
  bool signRight = false;           // same sign (both zero counts as right)
};

struct ZeroShotReport {
  std::vector<ZeroShotRow> rows;  // in file order
  double mapePercent = 0;         // mean |error| over the rows
  std::vector<CapPair> pairs;
  size_t signsRight = 0;
};

// Simulates every row (errors name the row: an unknown model or cluster, a layout that does not
// fit the cluster). `host`: every row's cluster gets this host profile instead of its own (a
// what-if: the same jobs on that host; nullptr = each built-in cluster's own). `kernelFitFrom`:
// every row at a tensor-core dtype has its layers timed by this device's kernel fit, transferred
// to the row's GPU (transferKernelFit); fp32 rows keep the roofline.
StatusOr<ZeroShotReport> zeroShot(const std::vector<PublishedRow>& rows,
                                  const HostProfile* host = nullptr,
                                  const DeviceSpec* kernelFitFrom = nullptr);

// The report as a Markdown table (one line per row, then MAPE and the cap-to-cap signs), as the
// docs/validation.md shows it.
std::string formatZeroShotMarkdown(const ZeroShotReport& report);

}  // namespace ddpscope::sim::validate
