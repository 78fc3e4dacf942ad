#include "sim/validate/report.h"

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

Summary summarize(const std::vector<Row>& rows) {
  Summary s;
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
    ++s.heldOut;
    perWorld[r.config.world].first += absError;
    perWorld[r.config.world].second += 1;
    if (!worst || absError > std::abs(worst->errorPercent)) worst = &r;
  }
  if (s.heldOut > 0) s.heldOutMapePercent = heldOutSum / static_cast<double>(s.heldOut);
  if (inSample > 0) s.inSampleMapePercent = inSampleSum / static_cast<double>(inSample);
  for (const auto& [w, sum] : perWorld) {
    s.perWorld.push_back({w, sum.first / sum.second, sum.second});
  }
  if (worst) s.worst = *worst;
  return s;
}

void writeCsv(const Report& report, std::ostream& out) {
  out << "model,world,bucket_cap_mb,find_unused_parameters,calibration,measured_ms,predicted_ms,"
         "error_"
         "percent\n";
  for (const Row& r : report.rows) {
    out << r.config.model.label << "," << r.config.world << "," << r.config.cap << ","
        << (r.config.findUnused ? 1 : 0) << "," << (r.config.calibration ? 1 : 0) << ","
        << r.measured.toMillis() << "," << r.predicted.toMillis() << "," << r.errorPercent << "\n";
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
                    {"error_percent", r.errorPercent}});
  }
  const Summary& s = report.summary;
  nlohmann::json perWorld = nlohmann::json::array();
  for (const WorldMape& w : s.perWorld) {
    perWorld.push_back(
        {{"world_size", w.world}, {"mape_percent", w.mapePercent}, {"held_out", w.configurations}});
  }
  const nlohmann::json summary = {{"grid", report.grid},
                                  {"mape_percent", s.heldOutMapePercent},
                                  {"in_sample_mape_percent", s.inSampleMapePercent},
                                  {"held_out", s.heldOut},
                                  {"per_world", perWorld},
                                  {"worst", s.worst ? s.worst->config.name() : ""},
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
