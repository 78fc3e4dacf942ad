#include "api/buckets_request.h"

#include <cctype>
#include <climits>
#include <nlohmann/json.hpp>
#include <span>

#include "api/ddp_flags.h"
#include "api/model_settings.h"
#include "base/strings.h"
#include "models/model_resolver.h"

namespace ddpscope::api {

using namespace ddpscope::ddp;  // the plan this request builds

std::vector<SettingSpec> bucketPlanSettingList() {
  std::vector<SettingSpec> out = api::modelSettingList();
  const std::vector<SettingSpec> ddpSettings = ddpSettingList(DdpSettingSet::bucketPlan());
  out.insert(out.end(), ddpSettings.begin(), ddpSettings.end());
  out.push_back(
      {"iteration", "WHICH",
       "1 = construction plan used in iteration 1; steady = after any rebuild (default)"});
  out.push_back(
      {"ready-order", "LIST", "gradient-ready order for the rebuild, comma-separated indices"});
  out.push_back(
      {"ready-order-file", "PATH",
       "ready order from a file: JSON array, {\"grad_ready_order\": [...]}, or plain text"});
  return out;
}

StatusOr<BucketPlanReport> bucketPlanFromSettings(const SettingValues& values) {
  BucketPlanReport r;
  ASSIGN_OR_RETURN(r.config, parseDdpSettings(values, DdpSettingSet::bucketPlan()));
  const std::string iteration = values.value("iteration").value_or("steady");
  if (iteration != "1" && iteration != "steady") {
    return invalidArgument("--iteration: expected 1 or steady, got '" + iteration + "'");
  }
  r.steady = iteration == "steady";
  if (values.has("ready-order") && values.has("ready-order-file")) {
    return invalidArgument("give either --ready-order or --ready-order-file, not both");
  }
  std::optional<std::vector<int>> readyOrder;
  if (auto text = values.value("ready-order")) {
    ASSIGN_OR_RETURN(readyOrder, parseIndexList(*text, "--ready-order"));
  } else if (auto path = values.value("ready-order-file")) {
    ASSIGN_OR_RETURN(readyOrder, readIndexListFile(*path));
  }
  if (readyOrder && !r.steady) {
    return invalidArgument(
        "--ready-order applies to the rebuilt plan: use it with --iteration steady");
  }
  r.givenReadyOrder = readyOrder.has_value();
  ASSIGN_OR_RETURN(r.model, api::loadModelFromSettings(values));
  if (!r.steady) {
    ASSIGN_OR_RETURN(r.plan, constructionPlan(r.model, r.config));
    r.sizeLimits = constructionLimits(r.config);
    r.how = "iteration 1 (construction plan)";
    return r;
  }
  std::optional<std::span<const int>> order;
  if (readyOrder) order = std::span<const int>(*readyOrder);
  ASSIGN_OR_RETURN(r.plan, steadyStatePlan(r.model, r.config, order));
  if (rebuildEligible(r.config)) {
    r.sizeLimits = rebuildLimits(r.config);
    r.how = readyOrder ? "steady state (rebuilt from the given ready order)"
                       : "steady state (rebuilt from the model's gradient-ready order)";
  } else {
    r.sizeLimits = constructionLimits(r.config);
    r.how = "steady state (find_unused_parameters: never rebuilt, construction plan)";
  }
  return r;
}

nlohmann::json bucketPlanReportJson(const BucketPlanReport& report) {
  return bucketPlanJson(report.model, report.config, report.plan, report.steady);
}

StatusOr<std::vector<int>> parseIndexList(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::string token;
  int position = 0;
  auto flush = [&]() -> Status {
    if (token.empty()) return Status::ok();
    auto v = parseInt64(token);
    if (!v || *v < 0 || *v > INT32_MAX) {
      return invalidArgument(what + ": entry " + std::to_string(position) +
                             ": expected a non-negative parameter index, got '" + token + "'");
    }
    out.push_back(static_cast<int>(*v));
    ++position;
    token.clear();
    return Status::ok();
  };
  for (char c : text) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) {
      RETURN_IF_ERROR(flush());
    } else {
      token.push_back(c);
    }
  }
  RETURN_IF_ERROR(flush());
  if (out.empty())
    return invalidArgument(what + ": expected a list of parameter indices, got nothing");
  return out;
}

StatusOr<std::vector<int>> readIndexListFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, readFileToString(path));
  return parseIndexListDocument(text, path);
}

StatusOr<std::vector<int>> parseIndexListDocument(const std::string& text,
                                                  const std::string& path) {
  std::string_view trimmed = trimString(text);
  if (!trimmed.empty() && (trimmed.front() == '[' || trimmed.front() == '{')) {
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return invalidArgument(path + ": invalid JSON");
    const nlohmann::json* list = &doc;
    std::string where = path;
    if (doc.is_object()) {
      if (!doc.contains("grad_ready_order")) {
        return invalidArgument(path +
                               ": expected a JSON array of parameter indices or an object "
                               "with \"grad_ready_order\"");
      }
      list = &doc["grad_ready_order"];
      where = path + ": grad_ready_order";
    }
    if (!list->is_array())
      return invalidArgument(where + ": expected an array of parameter indices");
    std::vector<int> out;
    for (size_t i = 0; i < list->size(); ++i) {
      const auto& v = (*list)[i];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return invalidArgument(where + "[" + std::to_string(i) +
                               "]: expected a non-negative integer parameter index, got " +
                               v.dump());
      }
      out.push_back(v.get<int>());
    }
    if (out.empty())
      return invalidArgument(where + ": expected a non-empty list of parameter indices");
    return out;
  }
  return parseIndexList(text, path);
}

}  // namespace ddpscope::api
