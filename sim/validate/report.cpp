#include "sim/validate/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

namespace ddpscope::sim::validate {

double errorPercent(Nanos predicted, Nanos measured) {
  return 100.0 * static_cast<double>((predicted - measured).count()) /
         static_cast<double>(measured.count());
}

double percentile95(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

NoiseFloor noiseFloor(const std::vector<std::vector<Nanos>>& runsPerConfiguration) {
  NoiseFloor f;
  std::vector<double> errors;
  for (const std::vector<Nanos>& runs : runsPerConfiguration) {
    if (runs.size() < 2) continue;
    ++f.configurations;
    f.runs += runs.size();
    for (size_t i = 0; i < runs.size(); ++i) {
      for (size_t j = 0; j < runs.size(); ++j) {
        if (i != j) errors.push_back(std::abs(errorPercent(runs[j], runs[i])));
      }
    }
  }
  f.pairs = errors.size();
  if (errors.empty()) return f;
  double sum = 0;
  for (double e : errors) sum += e;
  f.mapePercent = sum / static_cast<double>(errors.size());
  f.p95Percent = percentile95(std::move(errors));
  return f;
}

std::string_view engineName(Engine engine) {
  return engine == Engine::kTorch ? "torch" : "runtime";
}

std::optional<double> mapeOverNoise(const Report& report) {
  if (report.noise.pairs == 0 || report.noise.mapePercent <= 0) return std::nullopt;
  return report.summary.heldOutMapePercent / report.noise.mapePercent;
}

Summary summarize(const std::vector<Row>& rows) {
  Summary s;
  std::vector<double> heldOutErrors;
  double heldOutSum = 0;
  double inSampleSum = 0;
  size_t inSample = 0;
  const Row* worst = nullptr;
  std::map<int, std::pair<double, int>> perWorld;  // world → (Σ |error|, rows)
  for (const Row& r : rows) {
    const double absError = std::abs(r.errorPercent);
    if (r.config.calibration) {
      inSampleSum += absError;
      ++inSample;
      continue;
    }
    heldOutSum += absError;
    heldOutErrors.push_back(absError);
    ++s.heldOut;
    perWorld[r.config.world].first += absError;
    perWorld[r.config.world].second += 1;
    if (!worst || absError > std::abs(worst->errorPercent)) worst = &r;
  }
  if (s.heldOut > 0) s.heldOutMapePercent = heldOutSum / static_cast<double>(s.heldOut);
  s.heldOutP95Percent = percentile95(std::move(heldOutErrors));
  if (inSample > 0) s.inSampleMapePercent = inSampleSum / static_cast<double>(inSample);
  for (const auto& [w, sum] : perWorld) {
    s.perWorld.push_back({w, sum.first / sum.second, sum.second});
  }
  if (worst) s.worst = *worst;
  return s;
}

void writeCsv(const Report& report, std::ostream& out) {
  out << "model,world,bucket_cap_mb,find_unused_parameters,calibration,measured_ms,predicted_ms,"
         "error_percent,runs\n";
  for (const Row& r : report.rows) {
    out << r.config.model.label << "," << r.config.world << "," << r.config.cap << ","
        << (r.config.findUnused ? 1 : 0) << "," << (r.config.calibration ? 1 : 0) << ","
        << r.measured.toMillis() << "," << r.predicted.toMillis() << "," << r.errorPercent << ","
        << r.runs << "\n";
  }
}

void writeJson(const Report& report, std::ostream& out) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : report.rows) {
    rows.push_back({{"model", r.config.model.label},
                    {"world_size", r.config.world},
                    {"bucket_cap_mb", r.config.cap},
                    {"find_unused_parameters", r.config.findUnused},
                    {"calibration", r.config.calibration},
                    {"measured_ms", r.measured.toMillis()},
                    {"predicted_ms", r.predicted.toMillis()},
                    {"error_percent", r.errorPercent},
                    {"runs", r.runs}});
  }
  const Summary& s = report.summary;
  nlohmann::json perWorld = nlohmann::json::array();
  for (const WorldMape& w : s.perWorld) {
    perWorld.push_back(
        {{"world_size", w.world}, {"mape_percent", w.mapePercent}, {"held_out", w.configurations}});
  }
  const NoiseFloor& n = report.noise;
  nlohmann::json noise = nullptr;  // null without a noise floor (no configuration ran twice)
  if (n.pairs > 0) {
    noise = {{"mape_percent", n.mapePercent},
             {"p95_percent", n.p95Percent},
             {"pairs", n.pairs},
             {"configurations", n.configurations},
             {"runs", n.runs}};
  }
  const std::optional<double> ratio = mapeOverNoise(report);
  const nlohmann::json summary = {
      {"engine", engineName(report.engine)},
      {"grid", report.grid},
      {"torch",
       report.torchVersion.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.torchVersion)},
      {"mape_percent", s.heldOutMapePercent},
      {"p95_error_percent", s.heldOutP95Percent},
      {"in_sample_mape_percent", s.inSampleMapePercent},
      {"held_out", s.heldOut},
      {"per_world", perWorld},
      {"worst", s.worst ? s.worst->config.name() : ""},
      {"noise_floor", noise},
      {"mape_over_noise_floor", ratio ? nlohmann::json(*ratio) : nlohmann::json(nullptr)},
      {"run_seconds", report.runTime.toSeconds()},
      {"rows", rows}};
  out << summary.dump(2) << "\n";
}

void writeResultFiles(const Report& report, const std::filesystem::path& dir) {
  std::ofstream csv(dir / "validate.csv");
  writeCsv(report, csv);
  std::ofstream json(dir / "validate.json");
  writeJson(report, json);
}

}  // namespace ddpscope::sim::validate
