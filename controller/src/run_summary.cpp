#include "flotilla/controller/run_summary.h"

#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"
#include "flotilla/protocol/record_fields.h"
#include "flotilla/protocol/run_metrics.h"

namespace flotilla::controller {
namespace {

using nlohmann::json;

std::string fixed(double v, int precision) {
  return format_fixed(v, precision);
}

std::string iso_time(int64_t ms) {
  const std::time_t t = ms / 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream s;
  s << std::put_time(&tm, "%Y-%m-%d %H:%M:%S");
  return s.str();
}

}  // namespace

RunSummary summarize(const RunRow& run, const std::vector<RecordRow>& records) {
  RunSummary s;
  s.run = run;
  s.records = static_cast<int64_t>(records.size());
  if (!records.empty()) {
    s.first_seq = records.front().seq;
    s.last_seq = records.back().seq;
  }
  // By step and by epoch: a resumed run trains again the steps after its
  // checkpoint, and the later attempt's record of a step or epoch is the one
  // that stands.
  std::map<int64_t, json> lead_steps;
  std::map<int64_t, EpochSummary> epochs;
  for (const auto& record : records) {
    if (record.type != "step" && record.type != "epoch" && record.type != "end" &&
        record.type != "system")
      continue;
    const auto j = json::parse(record.body, nullptr, false);
    if (!j.is_object()) continue;
    if (record.type == "system") {
      if (j.contains("rank_rss") && j["rank_rss"].is_object())
        for (const auto& [rank, rss] : j["rank_rss"].items())
          if (rss.is_number()) s.peak_rank_rss = std::max(s.peak_rank_rss, rss.get<int64_t>());
      continue;
    }
    if (record.type == "end") {
      s.elapsed_s = std::max(s.elapsed_s, j.value("elapsed_s", 0.0));
      continue;
    }
    if (record.type == "step") {
      if (is_lead_step(j)) lead_steps[j.value("step", int64_t{0})] = j;
    } else {
      if (j.value("rank", int64_t{-1}) != 0) continue;  // every rank reports the same epoch
      EpochSummary e;
      e.epoch = j.value("epoch", int64_t{0});
      e.steps = j.value("steps", int64_t{0});
      e.loss = j.value("loss", 0.0);
      e.acc_train = j.value("acc_train", 0.0);
      e.acc_test = j.value("acc_test", 0.0);
      e.epoch_s = j.value("epoch_s", 0.0);
      e.samples_per_s = j.value("samples_per_s", 0.0);
      epochs[e.epoch] = e;
    }
  }
  for (const auto& [epoch, e] : epochs) {
    s.epoch_rows.push_back(e);
    s.epochs = e.epoch + 1;
    s.acc_train = e.acc_train;
    s.acc_test = e.acc_test;
  }
  std::vector<metrics::StepWork> lead_work;
  double step_ms = 0, data = 0, forward = 0, backward = 0, comm = 0, optimizer = 0, bytes = 0;
  const int64_t steps = static_cast<int64_t>(lead_steps.size());
  for (const auto& [step, j] : lead_steps) {
    s.steps = step;
    s.final_loss = j.value("loss", 0.0);
    lead_work.push_back({j.value("samples", 0.0), j.value("samples_per_s", 0.0)});
    step_ms += j.value("step_ms", 0.0);
    data += j.value("data_ms", 0.0);
    forward += j.value("forward_ms", 0.0);
    backward += j.value("backward_ms", 0.0);
    comm += j.value("comm_ms", 0.0);
    optimizer += j.value("optimizer_ms", 0.0);
    bytes += j.value("bytes_sent", 0.0);
  }
  if (steps > 0) {
    const double n = static_cast<double>(steps);
    s.samples_per_s = metrics::throughput(lead_work);
    s.step_ms = step_ms / n;
    s.data_ms = data / n;
    s.forward_ms = forward / n;
    s.backward_ms = backward / n;
    s.comm_ms = comm / n;
    s.optimizer_ms = optimizer / n;
    s.bytes_sent_per_step = bytes / n;
  }
  return s;
}

std::string summary_table(const RunSummary& s) {
  std::ostringstream out;
  auto row = [&](const std::string& name, const std::string& value) {
    out << "  " << std::left << std::setw(22) << name << value << "\n";
  };
  out << "Run " << s.run.id << " (" << s.run.experiment_name << "): " << name_of(s.run.state)
      << "\n";
  if (!s.run.reason.empty()) row("reason", s.run.reason);
  row("nodes / ranks", join_list(s.run.nodes) + " / " + std::to_string(s.run.world_size));
  row("created", iso_time(s.run.created_ms));
  row("records", std::to_string(s.records) + " (seq " + std::to_string(s.first_seq) + ".." +
                     std::to_string(s.last_seq) + ")");
  row("steps / epochs", std::to_string(s.steps) + " / " + std::to_string(s.epochs));
  // Figures a run does not have are a dash, never a zero that reads like one.
  const std::string none = "—";
  const bool stepped = s.samples_per_s.has_value();
  const bool evaluated = !s.epoch_rows.empty();
  row("final loss", stepped ? fixed(s.final_loss, 4) : none);
  row("train accuracy", evaluated ? fixed(100 * s.acc_train, 2) + " %" : none);
  row("test accuracy", evaluated ? fixed(100 * s.acc_test, 2) + " %" : none);
  row("throughput",
      stepped ? fixed(*s.samples_per_s, 1) + " samples/s (steady, after warm-up)" : none);
  row("step time", stepped ? fixed(s.step_ms, 2) + " ms = data " + fixed(s.data_ms, 2) +
                                 " + forward " + fixed(s.forward_ms, 2) + " + backward " +
                                 fixed(s.backward_ms, 2) + " + comm " + fixed(s.comm_ms, 2) +
                                 " + optimizer " + fixed(s.optimizer_ms, 2)
                           : none);
  row("bytes sent / step", stepped ? fixed(s.bytes_sent_per_step, 0) : none);
  row("sampled rank RSS max",
      s.peak_rank_rss > 0 ? fixed(s.peak_rank_rss / 1048576.0, 1) + " MiB" : none);
  row("wall time", fixed(s.elapsed_s, 1) + " s");
  if (!s.epoch_rows.empty()) {
    out << "\n  epoch  steps   loss     train acc  test acc   epoch s   samples/s\n";
    for (const auto& e : s.epoch_rows)
      out << "  " << std::setw(5) << e.epoch << "  " << std::setw(6) << e.steps << "  "
          << std::setw(7) << fixed(e.loss, 4) << "  " << std::setw(9)
          << fixed(100 * e.acc_train, 2) + " %"
          << "  " << std::setw(9) << fixed(100 * e.acc_test, 2) + " %"
          << "  " << std::setw(8) << fixed(e.epoch_s, 1) << "  " << std::setw(10)
          << fixed(e.samples_per_s, 1) << "\n";
  }
  return out.str();
}

std::string summary_json(const RunSummary& s) {
  json epochs = json::array();
  for (const auto& e : s.epoch_rows)
    epochs.push_back({{"epoch", e.epoch},
                      {"steps", e.steps},
                      {"loss", e.loss},
                      {"acc_train", e.acc_train},
                      {"acc_test", e.acc_test},
                      {"epoch_s", e.epoch_s},
                      {"samples_per_s", e.samples_per_s}});
  auto optional = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  auto config = json::parse(s.run.config_json, nullptr, false);
  if (config.is_discarded()) config = nullptr;
  json out{{"run",
            {{"id", s.run.id},
             {"experiment", s.run.experiment_name},
             {"state", name_of(s.run.state)},
             {"reason", s.run.reason},
             {"nodes", s.run.nodes},
             {"world_size", s.run.world_size},
             {"created_ms", s.run.created_ms},
             {"starting_ms", optional(s.run.starting_ms)},
             {"running_ms", optional(s.run.running_ms)},
             {"ended_ms", optional(s.run.ended_ms)},
             {"config", config}}},
           {"summary",
            {{"records", s.records},
             {"first_seq", s.first_seq},
             {"last_seq", s.last_seq},
             {"steps", s.steps},
             {"epochs", s.epochs},
             {"final_loss", s.final_loss},
             {"acc_train", s.acc_train},
             {"acc_test", s.acc_test},
             {"samples_per_s", s.samples_per_s ? json(*s.samples_per_s) : json(nullptr)},
             {"step_ms", s.step_ms},
             {"data_ms", s.data_ms},
             {"forward_ms", s.forward_ms},
             {"backward_ms", s.backward_ms},
             {"comm_ms", s.comm_ms},
             {"optimizer_ms", s.optimizer_ms},
             {"bytes_sent_per_step", s.bytes_sent_per_step},
             {"peak_rank_rss", s.peak_rank_rss},
             {"elapsed_s", s.elapsed_s}}},
           {"epochs", epochs}};
  return out.dump(2);
}

std::string steps_csv(const std::vector<RecordRow>& records) {
  std::ostringstream out;
  // Every field of a step record (docs/records.md), rank first.
  std::vector<std::string> columns;
  for (const auto name : records::field_names("step"))
    if (name != "rank") columns.emplace_back(name);
  out << "seq,node,rank";
  for (const auto& column : columns) out << ',' << column;
  out << '\n';
  for (const auto& record : records) {
    if (record.type != "step") continue;
    const auto j = json::parse(record.body, nullptr, false);
    if (!j.is_object()) continue;
    out << record.seq << ',' << record.node << ',' << record.rank;
    for (const auto& column : columns) {
      out << ',';
      if (j.contains(column)) out << j[column].dump();
    }
    out << '\n';
  }
  return out.str();
}

bool is_lead_step(const json& j) {
  if (!j.contains("loss")) return false;
  if (j.contains("replica")) return j.value("replica", int64_t{-1}) == 0;
  return j.value("rank", int64_t{-1}) == 0;
}

std::string progress_line(const RecordRow& step_record, int64_t steps_per_epoch) {
  const auto j = json::parse(step_record.body, nullptr, false);
  if (!j.is_object()) return {};
  std::ostringstream out;
  out << "epoch " << j.value("epoch", int64_t{0}) << "  step " << j.value("step", int64_t{0});
  if (steps_per_epoch > 0) out << " (" << steps_per_epoch << "/epoch)";
  out << "  loss " << fixed(j.value("loss", 0.0), 4) << "  "
      << fixed(j.value("samples_per_s", 0.0), 1) << " samples/s  step "
      << fixed(j.value("step_ms", 0.0), 1) << " ms";
  return out.str();
}

}  // namespace flotilla::controller
