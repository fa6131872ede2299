#include "flotilla/controller/run_prediction.h"

#include <QSqlDatabase>
#include <nlohmann/json.hpp>

#include "sql_query.h"

namespace flotilla::controller {
namespace {

std::optional<RunPrediction> parse(const std::string& plan_json) {
  const auto plan = nlohmann::json::parse(plan_json, nullptr, false);
  if (plan.is_discarded() || !plan.is_object() || !plan.contains("prediction") ||
      !plan["prediction"].is_object())
    return std::nullopt;
  const auto& p = plan["prediction"];
  RunPrediction out;
  out.step_ms = p.value("step_ms", 0.0);
  out.samples_per_s = p.value("samples_per_s", 0.0);
  out.samples_per_step = p.value("samples_per_step", int64_t{0});
  out.peak_memory_bytes = p.value("peak_memory_bytes", int64_t{0});
  if (p.contains("links") && p["links"].is_string()) out.links = p["links"].get<std::string>();
  out.plan_json = plan_json;
  return out;
}

}  // namespace

void set_run_prediction(Store& store, const std::string& run, const std::string& plan_json) {
  if (!parse(plan_json)) throw StoreError("run " + run + ": the plan to keep has no prediction");
  store.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store.path());
    q.run("INSERT OR REPLACE INTO run_predictions (run_id, plan_json, created_ms) VALUES (?, ?, ?)",
          {QString::fromStdString(run), QString::fromStdString(plan_json),
           QVariant::fromValue<qlonglong>(now_ms())});
  });
}

std::optional<RunPrediction> run_prediction(const Store& store, const std::string& run) {
  std::optional<RunPrediction> out;
  store.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store.path());
    q.run("SELECT plan_json, created_ms FROM run_predictions WHERE run_id = ?",
          {QString::fromStdString(run)});
    if (!q.next()) return;
    out = parse(q.at(0).toString().toStdString());
    if (out) out->created_ms = q.at(1).toLongLong();
  });
  return out;
}

}  // namespace flotilla::controller
