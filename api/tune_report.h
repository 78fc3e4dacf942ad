// The report ddpscope.torch.tune writes (docs/tuning.md; schema
// docs/schemas/tune-report.schema.json): read and checked here so that `ddpscope tune-report` can
// print it. Every error names the file and the JSON path of the offending field.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope::api {

inline constexpr const char* kTuneReportFormat = "ddpscope-tune-report";
inline constexpr int kTuneReportVersion = 1;

struct TuneReportCandidate {
  std::string label;
  bool current = false;
  std::string kwargs;                 // "" = DDP's defaults
  std::optional<double> predictedMs;  // null: not predicted (given by the caller, no export)
  std::optional<int64_t> buckets;     // DDP's own count, after its rebuild
  double measuredMs = 0;              // median over the rounds of the round's median step
  double gainPercent = 0;             // 100 · (1 − median per-round ratio to the current)
  int64_t roundsFaster = 0;
  double pValue = 1;
  bool eligible = false;
  bool chosen = false;
};

struct TuneReport {
  std::string torch, backend, device, timing, model, prediction;
  int64_t worldSize = 1;
  std::vector<TuneReportCandidate> candidates;  // the current settings first
  bool switched = false;
  int64_t chosen = 0;
  std::string reason, test, paste;
  double alpha = 0.05;
  int64_t rounds = 0;
  double noiseFloorPercent = 0;
  std::optional<double> confidence;
  int64_t stepsRecord = 0, stepsWarmup = 0, stepsMeasured = 0, stepsTotal = 0;
  double seconds = 0;
};

// Reads REPORT.json; errors: not a tune report (its "format"), a newer version, a missing or
// mistyped field (named by its JSON path), a chosen index outside the candidates.
StatusOr<TuneReport> readTuneReport(const std::string& path);

}  // namespace ddpscope::api
