#include "sim/validate/published.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ddp/ddp_config.h"
#include "io/file_input.h"
#include "io/json_reader.h"
#include "models/model_resolver.h"
#include "sim/compute/roofline_compute_model.h"
#include "sim/cost/cluster.h"
#include "sim/engine/ddp_simulator.h"

namespace ddpscope::sim::validate {

double PublishedRow::publishedStepMs() const {
  if (unit == "s/iter") return value * 1e3;
  return 1e3 * static_cast<double>(gpus) * static_cast<double>(batchPerGpu) / value;
}

namespace {

using Json = nlohmann::json;

// An optional, nullable string: nullopt when missing or null.
StatusOr<std::optional<std::string>> nullableString(const io::JsonReader& r, const Json& row,
                                                    const std::string& path, std::string_view key) {
  const Json* v = io::JsonReader::find(row, key);
  if (!v || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) return r.error(path + "." + std::string(key), "a string or null", v);
  return std::optional<std::string>(v->get<std::string>());
}

StatusOr<std::optional<double>> nullableNumber(const io::JsonReader& r, const Json& row,
                                               const std::string& path, std::string_view key,
                                               const std::string& expected) {
  const Json* v = io::JsonReader::find(row, key);
  if (!v || v->is_null()) return std::optional<double>();
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    return r.error(path + "." + std::string(key), expected, v);
  }
  return std::optional<double>(v->get<double>());
}

StatusOr<PublishedRow> readRow(const io::JsonReader& r, const Json& row, const std::string& path) {
  if (!row.is_object()) return r.error(path, "an object", &row);
  RETURN_IF_ERROR(r.checkKeys(row, path,
                              {"id",
                               "model",
                               "cluster",
                               "gpu",
                               "gpus",
                               "nodes",
                               "batch_per_gpu",
                               "precision",
                               "interconnect",
                               "bucket_cap_mb",
                               "pytorch",
                               "cuda",
                               "nccl",
                               "backend",
                               "metric",
                               "unit",
                               "value",
                               "comparison",
                               "published_diff_vs_cap25_percent",
                               "source_url",
                               "source_where",
                               "batch_source_url",
                               "notes"}));
  PublishedRow p;
  ASSIGN_OR_RETURN(p.id, r.requiredString(row, path, "id"));
  ASSIGN_OR_RETURN(p.model, r.requiredString(row, path, "model"));
  ASSIGN_OR_RETURN(p.cluster, r.requiredString(row, path, "cluster"));
  ASSIGN_OR_RETURN(int64_t gpus,
                   r.integer(row, path, "gpus", 1, 1 << 20, std::nullopt, "a positive integer"));
  ASSIGN_OR_RETURN(int64_t nodes,
                   r.integer(row, path, "nodes", 1, 1 << 20, std::nullopt, "a positive integer"));
  ASSIGN_OR_RETURN(int64_t batch, r.integer(row, path, "batch_per_gpu", 1, 1 << 20, std::nullopt,
                                            "a positive integer"));
  p.gpus = static_cast<int>(gpus);
  p.nodes = static_cast<int>(nodes);
  p.batchPerGpu = static_cast<int>(batch);
  if (p.gpus % p.nodes != 0) {
    return r.error(path + ".gpus", "a multiple of nodes (" + std::to_string(p.nodes) + ")",
                   io::JsonReader::find(row, "gpus"));
  }
  ASSIGN_OR_RETURN(p.precision,
                   r.oneOf(row, path, "precision", {"fp32", "tf32", "fp16", "bf16"}, std::nullopt));
  ASSIGN_OR_RETURN(p.bucketCapMb, nullableNumber(r, row, path, "bucket_cap_mb",
                                                 "a positive number of MiB or null"));
  if (p.bucketCapMb && *p.bucketCapMb <= 0) {
    return r.error(path + ".bucket_cap_mb", "a positive number of MiB or null",
                   io::JsonReader::find(row, "bucket_cap_mb"));
  }
  for (std::string_view key : {"gpu", "interconnect", "backend", "metric"}) {
    ASSIGN_OR_RETURN(std::string text, r.requiredString(row, path, key));
    if (text.empty()) {
      return r.error(path + "." + std::string(key), "a non-empty string",
                     io::JsonReader::find(row, key));
    }
  }
  for (std::string_view key : {"pytorch", "cuda", "nccl", "notes", "batch_source_url"}) {
    RETURN_IF_ERROR(nullableString(r, row, path, key).status());
  }
  ASSIGN_OR_RETURN(p.unit, r.oneOf(row, path, "unit", {"s/iter", "img/s"}, std::nullopt));
  ASSIGN_OR_RETURN(p.value,
                   r.number(row, path, "value", 1e-12, 1e12, std::nullopt, "a positive number"));
  ASSIGN_OR_RETURN(p.comparison, nullableString(r, row, path, "comparison"));
  ASSIGN_OR_RETURN(p.publishedDiffVsCap25Percent,
                   nullableNumber(r, row, path, "published_diff_vs_cap25_percent", "a number"));
  ASSIGN_OR_RETURN(p.sourceUrl, r.requiredString(row, path, "source_url"));
  if (!p.sourceUrl.starts_with("https://")) {
    return r.error(path + ".source_url", "an https:// address",
                   io::JsonReader::find(row, "source_url"));
  }
  ASSIGN_OR_RETURN(p.sourceWhere, r.requiredString(row, path, "source_where"));
  if (p.sourceWhere.empty()) {
    return r.error(path + ".source_where", "where in the source the number is",
                   io::JsonReader::find(row, "source_where"));
  }
  return p;
}

}  // namespace

StatusOr<std::vector<PublishedRow>> loadPublishedRows(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, io::readMaybeGzippedFile(path));
  ASSIGN_OR_RETURN(Json doc, parseJsonObject(text, path));
  io::JsonReader r(path);
  RETURN_IF_ERROR(r.checkKeys(doc, "", {"description", "fields", "rows"}));
  RETURN_IF_ERROR(r.requiredString(doc, "", "description").status());
  const Json* rows = io::JsonReader::find(doc, "rows");
  if (!rows || !rows->is_array() || rows->empty()) {
    return r.error("rows", "a non-empty array of rows", rows);
  }
  std::vector<PublishedRow> out;
  std::set<std::string> ids;
  for (size_t i = 0; i < rows->size(); ++i) {
    const std::string rowPath = "rows[" + std::to_string(i) + "]";
    ASSIGN_OR_RETURN(PublishedRow row, readRow(r, (*rows)[i], rowPath));
    if (!ids.insert(row.id).second) {
      return r.error(rowPath + ".id", "an id no other row has", &(*rows)[i]["id"]);
    }
    out.push_back(std::move(row));
  }
  return out;
}

StatusOr<ZeroShotReport> zeroShot(const std::vector<PublishedRow>& rows, const HostProfile* host,
                                  const DeviceSpec* kernelFitFrom) {
  ZeroShotReport report;
  double sum = 0;
  for (const PublishedRow& row : rows) {
    const std::string what = "published row '" + row.id + "': ";
    StatusOr<models::ModelSpec> model = models::resolveModel(row.model);
    if (!model.isOk()) return invalidArgument(what + model.status().message());
    StatusOr<ClusterSpec> cluster = loadBuiltinCluster(row.cluster);
    if (!cluster.isOk()) return invalidArgument(what + cluster.status().message());
    if (host != nullptr) cluster->host = *host;
    if (kernelFitFrom != nullptr && row.precision != "fp32") {
      StatusOr<KernelFit> fit = transferKernelFit(*kernelFitFrom, cluster->device, row.precision);
      if (!fit.isOk()) return invalidArgument(what + fit.status().message());
      cluster->device.kernelFit = std::move(*fit);
    }
    StatusOr<WorldLayout> layout = makeWorldLayout(*cluster, std::nullopt, row.gpus);
    if (!layout.isOk()) return invalidArgument(what + layout.status().message());
    if (layout->nodes != row.nodes) {
      return invalidArgument(what + std::to_string(row.gpus) + " GPUs on " + row.cluster +
                             " make " + std::to_string(layout->nodes) + " node(s), the row says " +
                             std::to_string(row.nodes));
    }
    SimOptions o;
    o.inputs.batch = row.batchPerGpu;
    o.dtype = row.precision;
    o.recordTrace = false;
    if (row.bucketCapMb && *row.bucketCapMb != ddp::DdpConfig::kDefaultBucketCapMb) {
      o.ddp.setBucketCapMb(*row.bucketCapMb);
    }
    StatusOr<SimResult> result = simulate(*model, *cluster, *layout, o);
    if (!result.isOk()) return invalidArgument(what + result.status().message());
    ZeroShotRow z;
    z.row = &row;
    z.publishedMs = row.publishedStepMs();
    z.predictedMs = result->summary.stepTime.toMillis();
    z.errorPercent = 100.0 * (z.predictedMs - z.publishedMs) / z.publishedMs;
    sum += std::abs(z.errorPercent);
    report.rows.push_back(z);
  }
  if (!report.rows.empty()) report.mapePercent = sum / static_cast<double>(report.rows.size());
  // Cap pairs: within a comparison, the smallest cap against every other cap.
  std::map<std::string, std::vector<const ZeroShotRow*>> groups;
  for (const ZeroShotRow& z : report.rows) {
    if (z.row->comparison && z.row->bucketCapMb) groups[*z.row->comparison].push_back(&z);
  }
  for (const auto& [name, members] : groups) {
    const ZeroShotRow* small = members.front();
    for (const ZeroShotRow* m : members) {
      if (*m->row->bucketCapMb < *small->row->bucketCapMb) small = m;
    }
    for (const ZeroShotRow* large : members) {
      if (*large->row->bucketCapMb == *small->row->bucketCapMb) continue;
      CapPair p;
      p.comparison = name;
      p.small = small;
      p.large = large;
      p.publishedDiffPercent =
          100.0 * (small->publishedMs - large->publishedMs) / large->publishedMs;
      p.predictedDiffPercent =
          100.0 * (small->predictedMs - large->predictedMs) / large->predictedMs;
      const auto sign = [](double v) { return (v > 0) - (v < 0); };
      p.signRight = sign(p.publishedDiffPercent) == sign(p.predictedDiffPercent);
      report.signsRight += p.signRight ? 1 : 0;
      report.pairs.push_back(p);
    }
  }
  return report;
}

std::string formatZeroShotMarkdown(const ZeroShotReport& report) {
  std::ostringstream out;
  out << "| row | cluster | GPUs | batch/GPU | precision | cap MB | published | step ms | "
         "predicted ms | error |\n"
      << "|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n";
  char line[512];
  for (const ZeroShotRow& z : report.rows) {
    const PublishedRow& r = *z.row;
    char cap[32] = "-";
    if (r.bucketCapMb) std::snprintf(cap, sizeof(cap), "%g", *r.bucketCapMb);
    std::snprintf(line, sizeof(line),
                  "| [%s](%s) | %s | %d | %d | %s | %s | %g %s | %.1f | %.1f | %+.1f %% |\n",
                  r.id.c_str(), r.sourceUrl.c_str(), r.cluster.c_str(), r.gpus, r.batchPerGpu,
                  r.precision.c_str(), cap, r.value, r.unit.c_str(), z.publishedMs, z.predictedMs,
                  z.errorPercent);
    out << line;
  }
  std::snprintf(line, sizeof(line), "\nZero-shot MAPE %.1f %% over %zu rows.\n", report.mapePercent,
                report.rows.size());
  out << line;
  if (!report.pairs.empty()) {
    std::snprintf(line, sizeof(line),
                  "Cap-to-cap: %zu of %zu signs right (smaller cap vs larger cap, step time):\n",
                  report.signsRight, report.pairs.size());
    out << line;
    for (const CapPair& p : report.pairs) {
      std::snprintf(line, sizeof(line),
                    "- %s: cap %g vs %g: published %+.2f %%, predicted %+.2f %% %s\n",
                    p.comparison.c_str(), *p.small->row->bucketCapMb, *p.large->row->bucketCapMb,
                    p.publishedDiffPercent, p.predictedDiffPercent,
                    p.signRight ? "(sign right)" : "(sign WRONG)");
      out << line;
    }
  }
  return out.str();
}

}  // namespace ddpscope::sim::validate
