#include "flotilla/controller/node_profiles.h"

#include <QDateTime>
#include <QSqlDatabase>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "flotilla/protocol/numbers.h"
#include "sql_query.h"

namespace flotilla::controller {
void add_node_profile(Store& store, const std::string& run, const std::string& node,
                      int64_t created_ms) {
  store.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store.path());
    q.run("INSERT INTO node_profiles (run_id, node, created_ms) VALUES (?, ?, ?)",
          {qs(run), qs(node), QVariant::fromValue<qlonglong>(created_ms)});
  });
}

std::vector<NodeProfile> node_profiles(const Store& store, const std::optional<std::string>& node,
                                       bool with_records) {
  std::vector<NodeProfile> rows;
  store.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store.path());
    const QString sql =
        "SELECT p.run_id, p.node, p.created_ms, r.state FROM node_profiles p "
        "JOIN runs r ON r.id = p.run_id%1 ORDER BY p.created_ms DESC, p.run_id DESC";
    if (node)
      q.run(sql.arg(" WHERE p.node = ?"), {qs(*node)});
    else
      q.run(sql.arg(""));
    while (q.next()) {
      NodeProfile p;
      p.run_id = ss(q.at(0));
      p.node = ss(q.at(1));
      p.created_ms = q.at(2).toLongLong();
      p.state = run_state_from_name(ss(q.at(3))).value_or(RunState::failed);
      rows.push_back(p);
    }
  });
  if (!with_records) return rows;
  for (auto& p : rows)
    for (const auto& record :
         store.records(p.run_id, RecordFilter{"profile", std::nullopt, std::nullopt}))
      if (record.rank == 0) p.record_json = record.body;
  return rows;
}

std::vector<std::string> usable_node_profiles(const Store& store, const std::string& node) {
  std::vector<std::string> usable;
  std::set<std::string> keys;
  for (const auto& p : node_profiles(store, node)) {  // newest first
    auto j = nlohmann::json::parse(p.record_json, nullptr, false);
    if (p.state != RunState::finished || !j.is_object() || !j.contains("node_key") ||
        !j["node_key"].is_string() || !keys.insert(j["node_key"].get<std::string>()).second)
      continue;
    j["node"] = node;
    usable.push_back(j.dump());
  }
  return usable;
}

int write_node_profiles(const std::vector<std::string>& profiles,
                        const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  int written = 0;
  for (const auto& profile : profiles)
    std::ofstream(dir / ("profile-" + std::to_string(++written) + ".json")) << profile;
  return written;
}

std::string node_profile_line(const NodeProfile& p) {
  const auto when =
      QDateTime::fromMSecsSinceEpoch(p.created_ms).toString("yyyy-MM-dd hh:mm").toStdString();
  const auto j = nlohmann::json::parse(p.record_json, nullptr, false);
  if (!j.is_object() || !j.contains("profile") || !j["profile"].is_object())
    return when + "  " + p.run_id + "  " + std::string(name_of(p.state)) + ", no profile";
  const auto& profile = j["profile"];
  double compute_ms = profile.value("optimizer_ms", 0.0);
  if (profile.contains("blocks") && profile["blocks"].is_array())
    for (const auto& b : profile["blocks"]) compute_ms += b.value("full_ms", 0.0);
  return when + "  " + p.run_id + "  micro-batch " + std::to_string(j.value("micro_batch", 0)) +
         ", " + std::to_string(j.value("threads", 0)) + " thread(s) of " +
         std::to_string(j.value("cores", 0)) + " cores on " + j.value("host", std::string("?")) +
         ": " + std::to_string(profile["blocks"].size()) + " blocks, a micro-batch's forward, " +
         "backward and optimizer " + format_fixed(compute_ms, compute_ms < 10 ? 2 : 1) + " ms";
}

}  // namespace flotilla::controller
