#include "api/tune_report.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "io/file_input.h"
#include "io/json_reader.h"

namespace ddpscope::api {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

StatusOr<std::optional<double>> nullableNumber(const io::JsonReader& r, const nlohmann::json& o,
                                               const std::string& path, const char* key) {
  const nlohmann::json* v = io::JsonReader::find(o, key);
  if (v == nullptr) return r.error(jsonKeyPath(path, key), "a number or null", v);
  if (v->is_null()) return std::optional<double>();
  ASSIGN_OR_RETURN(double x, r.number(o, path, key, 0, kInf, std::nullopt, "a number >= 0"));
  return std::optional<double>(x);
}

StatusOr<TuneReportCandidate> readCandidate(const io::JsonReader& r, const nlohmann::json& c,
                                            const std::string& path) {
  if (!c.is_object()) return r.error(path, "an object", &c);
  TuneReportCandidate out;
  ASSIGN_OR_RETURN(out.label, r.requiredString(c, path, "label"));
  ASSIGN_OR_RETURN(out.current, r.boolean(c, path, "current", std::nullopt));
  ASSIGN_OR_RETURN(out.kwargs, r.string(c, path, "kwargs", ""));
  ASSIGN_OR_RETURN(out.predictedMs, nullableNumber(r, c, path, "predicted_step_ms"));
  const nlohmann::json* buckets = io::JsonReader::find(c, "buckets");
  if (buckets != nullptr && !buckets->is_null()) {
    ASSIGN_OR_RETURN(int64_t n, r.integer(c, path, "buckets", 1, kMaxInt, std::nullopt,
                                          "a positive integer or null"));
    out.buckets = n;
  }
  ASSIGN_OR_RETURN(out.measuredMs,
                   r.number(c, path, "measured_step_ms", 0, kInf, std::nullopt, "a number >= 0"));
  ASSIGN_OR_RETURN(out.gainPercent,
                   r.number(c, path, "gain_percent", -kInf, kInf, std::nullopt, "a number"));
  ASSIGN_OR_RETURN(out.roundsFaster, r.integer(c, path, "rounds_faster", 0, kMaxInt, std::nullopt,
                                               "an integer >= 0"));
  ASSIGN_OR_RETURN(out.pValue,
                   r.number(c, path, "p_value", 0, 1, std::nullopt, "a number in [0, 1]"));
  ASSIGN_OR_RETURN(out.eligible, r.boolean(c, path, "eligible", std::nullopt));
  ASSIGN_OR_RETURN(out.chosen, r.boolean(c, path, "chosen", std::nullopt));
  return out;
}

}  // namespace

StatusOr<TuneReport> readTuneReport(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, io::readMaybeGzippedFile(path));
  ASSIGN_OR_RETURN(const nlohmann::json doc, parseJsonObject(text, path));
  const io::JsonReader r(path);
  const nlohmann::json* format = io::JsonReader::find(doc, "format");
  if (format == nullptr || !format->is_string() || *format != kTuneReportFormat) {
    return invalidArgument(path + ": not a ddpscope.torch.tune report (its \"format\" is " +
                           describeJsonValue(format) + ", expected \"" + kTuneReportFormat + "\")");
  }
  ASSIGN_OR_RETURN(const int64_t version,
                   r.integer(doc, "", "version", 1, kMaxInt, std::nullopt, "an integer >= 1"));
  if (version > kTuneReportVersion) {
    return invalidArgument(path + ": report version " + std::to_string(version) +
                           " is newer than this ddpscope reads (" +
                           std::to_string(kTuneReportVersion) + ")");
  }
  TuneReport out;
  ASSIGN_OR_RETURN(out.torch, r.requiredString(doc, "", "torch"));
  ASSIGN_OR_RETURN(out.worldSize,
                   r.integer(doc, "", "world_size", 1, kMaxInt, std::nullopt, "an integer >= 1"));
  ASSIGN_OR_RETURN(out.backend, r.requiredString(doc, "", "backend"));
  ASSIGN_OR_RETURN(out.device, r.oneOf(doc, "", "device", {"cpu", "cuda"}, std::nullopt));
  ASSIGN_OR_RETURN(out.timing, r.requiredString(doc, "", "timing"));
  ASSIGN_OR_RETURN(out.model, r.requiredString(doc, "", "model"));
  ASSIGN_OR_RETURN(out.prediction, r.requiredString(doc, "", "prediction"));
  const nlohmann::json* candidates = io::JsonReader::find(doc, "candidates");
  if (candidates == nullptr || !candidates->is_array() || candidates->empty()) {
    return r.error("candidates", "a non-empty array", candidates);
  }
  for (size_t i = 0; i < candidates->size(); ++i) {
    ASSIGN_OR_RETURN(TuneReportCandidate c,
                     readCandidate(r, (*candidates)[i], jsonIndexPath("candidates", i)));
    out.candidates.push_back(std::move(c));
  }
  if (!out.candidates[0].current) {
    return invalidArgument(path +
                           ": candidates[0]: expected the current settings (\"current\": "
                           "true) first");
  }
  ASSIGN_OR_RETURN(const nlohmann::json* decision, r.object(doc, "", "decision", true));
  ASSIGN_OR_RETURN(out.switched, r.boolean(*decision, "decision", "switched", std::nullopt));
  ASSIGN_OR_RETURN(out.chosen, r.integer(*decision, "decision", "chosen", 0,
                                         static_cast<int64_t>(out.candidates.size()) - 1,
                                         std::nullopt, "the index of a candidate"));
  ASSIGN_OR_RETURN(out.reason, r.requiredString(*decision, "decision", "reason"));
  ASSIGN_OR_RETURN(out.test, r.requiredString(*decision, "decision", "test"));
  ASSIGN_OR_RETURN(out.paste, r.requiredString(*decision, "decision", "paste"));
  ASSIGN_OR_RETURN(out.alpha, r.number(*decision, "decision", "alpha", 0, 1, std::nullopt,
                                       "a number in (0, 1)"));
  ASSIGN_OR_RETURN(out.rounds, r.integer(*decision, "decision", "rounds", 1, kMaxInt, std::nullopt,
                                         "an integer >= 1"));
  ASSIGN_OR_RETURN(out.noiseFloorPercent, r.number(*decision, "decision", "noise_floor_percent", 0,
                                                   kInf, std::nullopt, "a number >= 0"));
  ASSIGN_OR_RETURN(out.confidence, nullableNumber(r, *decision, "decision", "confidence"));
  if (out.switched != (out.chosen != 0)) {
    return invalidArgument(path + ": decision: \"switched\" is " +
                           (out.switched ? "true" : "false") + " but \"chosen\" is " +
                           std::to_string(out.chosen) + " (0 = the current settings)");
  }
  ASSIGN_OR_RETURN(const nlohmann::json* steps, r.object(doc, "", "steps", true));
  ASSIGN_OR_RETURN(out.stepsRecord, r.integer(*steps, "steps", "record", 0, kMaxInt, std::nullopt,
                                              "an integer >= 0"));
  ASSIGN_OR_RETURN(out.stepsWarmup, r.integer(*steps, "steps", "warmup", 0, kMaxInt, std::nullopt,
                                              "an integer >= 0"));
  ASSIGN_OR_RETURN(out.stepsMeasured, r.integer(*steps, "steps", "measured", 0, kMaxInt,
                                                std::nullopt, "an integer >= 0"));
  ASSIGN_OR_RETURN(out.stepsTotal, r.integer(*steps, "steps", "total", 0, kMaxInt, std::nullopt,
                                             "an integer >= 0"));
  ASSIGN_OR_RETURN(out.seconds,
                   r.number(doc, "", "seconds", 0, kInf, std::nullopt, "a number >= 0"));
  return out;
}

}  // namespace ddpscope::api
