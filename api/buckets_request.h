// The bucket plan `ddpscope buckets` prints, from named settings (base/setting_values.h): the
// model, the DDP settings that change the plan, which iteration's plan ("1" or "steady") and the
// gradient-ready order the rebuild uses. The CLI formats the result as a table or JSON; the
// Python package's buckets() returns its JSON. Errors name the setting as its flag.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/ddp_flags.h"
#include "base/setting_values.h"
#include "base/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/ddp_config.h"
#include "models/model_spec.h"

namespace ddpscope::api {

// The settings of a bucket-plan request, in --help order: model, the DDP settings
// that change the plan (DdpSettingSet::bucketPlan()), iteration, ready-order, ready-order-file.
std::vector<SettingSpec> bucketPlanSettingList();

struct BucketPlanReport {
  models::ModelSpec model;
  ddp::DdpConfig config;
  ddp::BucketPlan plan;
  bool steady = true;               // the steady-state plan (else iteration 1's)
  bool givenReadyOrder = false;     // rebuilt from "ready-order" / "ready-order-file"
  std::vector<int64_t> sizeLimits;  // the size limits the plan was built with, in bytes
  std::string how;                  // "iteration 1 (construction plan)", "steady state (...)"
};

// Validates the settings (in the CLI's order: DDP settings, iteration, ready order, model) and
// builds the plan.
StatusOr<BucketPlanReport> bucketPlanFromSettings(const SettingValues& values);

// bucketPlanJson of the report (ddp/bucket_plan.h): what `ddpscope buckets --json` prints.
nlohmann::json bucketPlanReportJson(const BucketPlanReport& report);

// Parses "3,2,1,0" (commas and/or whitespace) into parameter indices; `what` names the source
// in errors (e.g. "--ready-order").
StatusOr<std::vector<int>> parseIndexList(const std::string& text, const std::string& what);
// Reads a ready order file: a JSON array of ints, a JSON object with "grad_ready_order", or
// plain text of ints separated by commas/whitespace.
StatusOr<std::vector<int>> readIndexListFile(const std::string& path);
// The same for a file's text already in memory; `path` names it in errors.
StatusOr<std::vector<int>> parseIndexListDocument(const std::string& text, const std::string& path);

}  // namespace ddpscope::api
