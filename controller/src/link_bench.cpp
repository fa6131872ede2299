#include "flotilla/controller/link_bench.h"

#include <QDateTime>
#include <QSqlDatabase>

#include <algorithm>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/numbers.h"
#include "sql_query.h"

namespace flotilla::controller {
namespace {

// A bench record's point, or nothing for another operation or a malformed one.
std::optional<LinkBenchPoint> point_of(const std::string& body, const std::string& op) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || j.value("op", std::string()) != op) return std::nullopt;
  auto number = [&](const char* name) -> std::optional<double> {
    const auto it = j.find(name);
    if (it == j.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  const auto bytes = number("bytes"), time_us = number("time_us"), algbw = number("algbw_gbps"),
             busbw = number("busbw_gbps");
  if (!bytes || !time_us || !algbw || !busbw || *bytes <= 0) return std::nullopt;
  LinkBenchPoint p;
  p.bytes = static_cast<int64_t>(*bytes);
  p.ranks = static_cast<int64_t>(number("ranks").value_or(0));
  p.time_us = *time_us;
  p.algbw_gbps = *algbw;
  p.busbw_gbps = *busbw;
  return p;
}

// "LABEL: T us at SMALLEST, LARGEST_FIGURE at LARGEST[TAIL]": a sweep's two
// ends on one line, under the all-reduce's table.
void print_sweep_ends(std::ostream& out, const std::string& label,
                      const std::vector<LinkBenchPoint>& points, const std::string& largest_figure,
                      const std::string& tail = "") {
  out << label << ": " << format_fixed(points.front().time_us, 1) << " us at "
      << byte_size_text(static_cast<double>(points.front().bytes)) << ", " << largest_figure
      << " at " << byte_size_text(static_cast<double>(points.back().bytes)) << tail << "\n";
}

}  // namespace

std::string node_set_key(std::vector<std::string> nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return join_list(nodes);
}

void add_link_bench(Store& store, const LinkBenchRow& row) {
  store.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store.path());
    q.run(
        "INSERT INTO link_benches (run_id, node_set, ranks_per_node, device, created_ms) "
        "VALUES (?, ?, ?, ?, ?)",
        {qs(row.run_id), qs(row.node_set), QVariant::fromValue<qlonglong>(row.ranks_per_node),
         qs(row.device), QVariant::fromValue<qlonglong>(row.created_ms)});
  });
}

std::vector<LinkBenchRow> link_benches(const Store& store,
                                       const std::optional<std::string>& node_set) {
  std::vector<LinkBenchRow> rows;
  store.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store.path());
    const QString sql =
        "SELECT b.run_id, b.node_set, b.ranks_per_node, b.device, b.created_ms, r.state "
        "FROM link_benches b JOIN runs r ON r.id = b.run_id%1 "
        "ORDER BY b.created_ms DESC, b.run_id DESC";
    if (node_set)
      q.run(sql.arg(" WHERE b.node_set = ?"), {qs(*node_set)});
    else
      q.run(sql.arg(""));
    while (q.next()) {
      LinkBenchRow r;
      r.run_id = ss(q.at(0));
      r.node_set = ss(q.at(1));
      r.ranks_per_node = q.at(2).toLongLong();
      r.device = ss(q.at(3));
      r.created_ms = q.at(4).toLongLong();
      r.state = run_state_from_name(ss(q.at(5))).value_or(RunState::failed);
      rows.push_back(r);
    }
  });
  return rows;
}

std::vector<LinkBenchPoint> link_bench_points(const Store& store, const std::string& run,
                                              const std::string& op) {
  std::map<int64_t, std::pair<int64_t, LinkBenchPoint>> by_size;  // bytes -> (rank, point)
  for (const auto& record : store.records(run, RecordFilter{"bench", std::nullopt, std::nullopt})) {
    const auto point = point_of(record.body, op);
    if (!point) continue;
    const auto it = by_size.find(point->bytes);
    if (it == by_size.end() || record.rank < it->second.first)
      by_size[point->bytes] = {record.rank, *point};
  }
  std::vector<LinkBenchPoint> points;
  for (const auto& [bytes, ranked] : by_size) points.push_back(ranked.second);
  return points;
}

std::map<std::string, NodeMachine> link_bench_machines(const Store& store, const std::string& run) {
  std::map<std::string, NodeMachine> nodes;
  for (const auto& record : store.records(run, RecordFilter{"start", std::nullopt, std::nullopt})) {
    const auto j = nlohmann::json::parse(record.body, nullptr, false);
    if (!j.is_object() || !j.contains("machine") || !j["machine"].is_string() ||
        j["machine"].get<std::string>().empty())
      continue;
    NodeMachine m{j["machine"].get<std::string>(), 0};
    if (j.contains("cores") && j["cores"].is_number_integer()) m.cores = j["cores"].get<int64_t>();
    nodes.emplace(record.node, m);
  }
  return nodes;
}

std::optional<LinkBench> latest_link_bench(const Store& store,
                                           const std::vector<std::string>& nodes,
                                           std::optional<int64_t> ranks) {
  std::optional<LinkBench> fallback;
  for (const auto& row : link_benches(store, node_set_key(nodes))) {
    if (row.state != RunState::finished) continue;
    auto points = link_bench_points(store, row.run_id);
    if (points.empty()) continue;
    LinkBench bench{row,
                    std::move(points),
                    link_bench_points(store, row.run_id, "sendrecv"),
                    link_bench_points(store, row.run_id, "sendrecv_computing"),
                    link_bench_points(store, row.run_id, "allreduce_computing"),
                    link_bench_machines(store, row.run_id)};
    if (!ranks || bench.points.front().ranks == *ranks) return bench;
    if (!fallback) fallback = std::move(bench);
  }
  return fallback;
}

std::string link_measurements_json(const LinkBench& bench) {
  const int64_t ranks = bench.points.empty() ? 0 : bench.points.front().ranks;
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : bench.points)
    points.push_back({{"bytes", p.bytes}, {"time_us", p.time_us}, {"busbw_gbps", p.busbw_gbps}});
  nlohmann::json p2p = nlohmann::json::array();
  for (const auto& p : bench.p2p) p2p.push_back({{"bytes", p.bytes}, {"time_us", p.time_us}});
  nlohmann::json p2p_computing = nlohmann::json::array();
  for (const auto& p : bench.p2p_computing)
    p2p_computing.push_back({{"bytes", p.bytes}, {"time_us", p.time_us}});
  nlohmann::json allreduce_computing = nlohmann::json::array();
  for (const auto& p : bench.allreduce_computing)
    allreduce_computing.push_back(
        {{"bytes", p.bytes}, {"time_us", p.time_us}, {"busbw_gbps", p.busbw_gbps}});
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& [node, m] : bench.nodes)
    nodes[node] = {{"machine", m.machine}, {"cores", m.cores}};
  const auto measured = QDateTime::fromMSecsSinceEpoch(bench.row.created_ms)
                            .toString("yyyy-MM-dd hh:mm")
                            .toStdString();
  return nlohmann::json{{"source", "flotilla nodes bench over " + bench.row.node_set + " (" +
                                       std::to_string(ranks) + " ranks, " + bench.row.device +
                                       ", run " + bench.row.run_id + ", " + measured + ")"},
                        {"run", bench.row.run_id},
                        {"measured_ms", bench.row.created_ms},
                        {"ranks", ranks},
                        {"allreduce", points},
                        {"p2p", p2p},
                        {"p2p_computing", p2p_computing},
                        {"allreduce_computing", allreduce_computing},
                        {"nodes", nodes}}
      .dump();
}

std::string byte_size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  const bool whole = bytes == static_cast<double>(static_cast<int64_t>(bytes));
  return (whole ? format_fixed(bytes, 0) : format_fixed(bytes, 1)) + " " + units[unit];
}

std::string link_bench_table(const LinkBench& bench) {
  std::ostringstream out;
  out << "all-reduce over " << bench.row.node_set << " ("
      << (bench.points.empty() ? 0 : bench.points.front().ranks) << " ranks, " << bench.row.device
      << "), run " << bench.row.run_id << "\n";
  out << std::right << std::setw(12) << "size" << std::setw(14) << "time us" << std::setw(14)
      << "algbw GB/s" << std::setw(14) << "busbw GB/s"
      << "\n";
  for (const auto& p : bench.points)
    out << std::setw(12) << byte_size_text(static_cast<double>(p.bytes)) << std::setw(14)
        << format_fixed(p.time_us, 1) << std::setw(14) << format_fixed(p.algbw_gbps, 3)
        << std::setw(14) << format_fixed(p.busbw_gbps, 3) << "\n";
  if (!bench.p2p.empty())
    print_sweep_ends(out, "send/receive one way", bench.p2p,
                     format_fixed(bench.p2p.back().algbw_gbps, 3) + " GB/s",
                     " (" + std::to_string(bench.p2p.size()) + " sizes)");
  if (!bench.p2p_computing.empty())
    print_sweep_ends(out, "send/receive one way with every rank computing", bench.p2p_computing,
                     format_fixed(bench.p2p_computing.back().time_us, 1) + " us");
  if (!bench.allreduce_computing.empty())
    print_sweep_ends(out, "all-reduce with every rank computing", bench.allreduce_computing,
                     format_fixed(bench.allreduce_computing.back().busbw_gbps, 3) + " GB/s busbw");
  return out.str();
}

}  // namespace flotilla::controller
