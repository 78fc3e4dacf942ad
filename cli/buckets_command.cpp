#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "api/buckets_request.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ddpscope::cli {
namespace {

std::string formatLimit(int64_t limitBytes) {
  if (limitBytes == INT64_MAX) return "maxsize";
  if (limitBytes == 0) return "0 (sparse)";
  return formatBytes(limitBytes);
}

ArgParser makeBucketsParser() {
  ArgParser parser(
      "ddpscope buckets",
      "--model M [--bucket-cap-mb X] [--first-bucket-mb Y]\n"
      "       [--bucket-cap-mb-list L,...] [--find-unused] [--static-graph]\n"
      "       [--torch-version 2.15|1.13|1.5] [--iteration 1|steady]\n"
      "       [--ready-order i,j,... | --ready-order-file PATH] [--json]",
      "Prints PyTorch DDP's bucket plan for a model, exactly as DistributedDataParallel builds "
      "it:\n"
      "buckets in reduction (allreduce launch) order, each with its parameters (indices into\n"
      "model.parameters()) in flat-buffer order, its bytes and its size limit.");
  parser.options(api::bucketPlanSettingList())
      .flag("json", "machine-readable output")
      .option("csv", "PATH", "also write the bucket table as CSV (index, tensors, bytes, ...)")
      .epilog(
          "Without --ready-order the steady-state plan uses the model's own gradient-ready order\n"
          "(from its layers; reverse registration order for a parameter-only file).\n"
          "With find_unused_parameters (and no static graph) DDP never rebuilds: the steady plan\n"
          "is the construction plan.\n\n"
          "example: ddpscope buckets --model resnet50 --bucket-cap-mb 10 --json");
  return parser;
}

}  // namespace

Status runBucketsCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser = makeBucketsParser();
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }

  ASSIGN_OR_RETURN(const api::BucketPlanReport report, api::bucketPlanFromSettings(args));
  const models::ModelSpec& model = report.model;
  const ddp::DdpConfig& config = report.config;
  const ddp::BucketPlan& plan = report.plan;
  const std::vector<int64_t>& limits = report.sizeLimits;
  const nlohmann::json planJson = api::bucketPlanReportJson(report);
  if (auto csv = args.value("csv")) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& b : planJson["buckets"]) {
      rows.push_back({{"index", b["index"]},
                      {"tensors", b["params"].size()},
                      {"bytes", b["bytes"]},
                      {"size_limit", b["size_limit"]},
                      {"params", b["params"]}});
    }
    RETURN_IF_ERROR(
        writeCsvFile(*csv, {"index", "tensors", "bytes", "size_limit", "params"}, rows));
  }
  if (args.has("json")) {
    io.out << planJson.dump(2) << "\n";
    return Status::ok();
  }

  std::ostringstream o;
  o << "model " << model.name << ": " << model.numTensors() << " tensors, "
    << formatThousands(model.numParams()) << " parameters, " << formatBytes(model.totalBytes())
    << "\n";
  o << "plan: " << report.how << ", semantics " << ddp::semanticsProfileName(config.profile)
    << ", bucket_cap " << formatBytes(config.bucketCapBytes()) << ", limits [";
  for (size_t i = 0; i < limits.size(); ++i) o << (i ? ", " : "") << formatLimit(limits[i]);
  o << "]\n";
  o << plan.buckets.size() << " buckets in reduction order:\n";
  o << std::right << std::setw(6) << "bucket" << std::setw(8) << "tensors" << std::setw(16)
    << "bytes" << std::setw(13) << "limit"
    << "  first .. last parameter (flat-buffer order)\n";
  for (const auto& b : plan.buckets) {
    const std::string& first = model.params[b.params.front()].name;
    const std::string& last = model.params[b.params.back()].name;
    o << std::setw(6) << b.index << std::setw(8) << b.params.size() << std::setw(16)
      << formatThousands(b.bytes) << std::setw(13) << formatLimit(b.sizeLimit) << "  " << first;
    if (b.params.size() > 1) o << " .. " << last;
    o << "\n";
  }
  io.out << o.str();
  return Status::ok();
}

}  // namespace ddpscope::cli
