#include "flotilla/controller/sweep_store.h"

#include <nlohmann/json.hpp>

#include "sql_query.h"

namespace flotilla::controller {
namespace {

QVariant number(int64_t v) {
  return QVariant::fromValue<qlonglong>(v);
}
std::optional<int64_t> optional_of(const QVariant& v) {
  if (v.isNull()) return std::nullopt;
  return v.toLongLong();
}

constexpr const char* kSweepStates[] = {"running", "finished", "killed"};
constexpr const char* kPointStates[] = {"queued", "running", "finished", "failed",
                                        "oom",    "killed",  "skipped",  "refused"};

const char* kSweepColumns =
    "id, name, spec_json, source, state, reason, created_ms, ended_ms, owner, owner_seen_ms";

SweepRow sweep_of(const SqlQuery& q) {
  SweepRow r;
  r.id = q.at(0).toLongLong();
  r.name = ss(q.at(1));
  r.spec_json = ss(q.at(2));
  r.source = ss(q.at(3));
  const auto state = ss(q.at(4));
  r.state = state == "finished" ? SweepState::finished
            : state == "killed" ? SweepState::killed
                                : SweepState::running;
  r.reason = ss(q.at(5));
  r.created_ms = q.at(6).toLongLong();
  r.ended_ms = optional_of(q.at(7));
  r.owner = ss(q.at(8));
  r.owner_seen_ms = optional_of(q.at(9));
  return r;
}

const char* kPointColumns =
    "sweep_id, idx, values_json, coords_json, repetition, config_json, state, run_id, reason, "
    "started_ms, ended_ms";

SweepPointRow point_of(const SqlQuery& q) {
  SweepPointRow p;
  p.sweep_id = q.at(0).toLongLong();
  p.index = q.at(1).toLongLong();
  p.values_json = ss(q.at(2));
  const auto coords = nlohmann::json::parse(ss(q.at(3)), nullptr, false);
  if (coords.is_array())
    for (const auto& c : coords) p.coords.push_back(c.is_number_integer() ? c.get<int64_t>() : 0);
  p.repeat = q.at(4).toLongLong();
  p.config_json = ss(q.at(5));
  p.state = point_state_from_name(ss(q.at(6))).value_or(PointState::failed);
  p.run_id = ss(q.at(7));
  p.reason = ss(q.at(8));
  p.started_ms = optional_of(q.at(9));
  p.ended_ms = optional_of(q.at(10));
  return p;
}

}  // namespace

std::string_view name_of(SweepState state) {
  return kSweepStates[static_cast<int>(state)];
}

std::string_view name_of(PointState state) {
  return kPointStates[static_cast<int>(state)];
}

std::optional<PointState> point_state_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kPointStates); ++i)
    if (name == kPointStates[i]) return static_cast<PointState>(i);
  return std::nullopt;
}

PointState point_state_of(RunState run_end) {
  switch (run_end) {
    case RunState::finished:
      return PointState::finished;
    case RunState::oom:
      return PointState::oom;
    case RunState::killed:
      return PointState::killed;
    default:
      return PointState::failed;
  }
}

SweepProgress progress_of(const std::vector<SweepPointRow>& points) {
  SweepProgress p;
  for (const auto& point : points) {
    ++p.total;
    switch (point.state) {
      case PointState::queued:
        ++p.queued;
        break;
      case PointState::running:
        ++p.running;
        break;
      case PointState::finished:
        ++p.finished;
        break;
      case PointState::failed:
        ++p.failed;
        break;
      case PointState::oom:
        ++p.oom;
        break;
      case PointState::killed:
        ++p.killed;
        break;
      case PointState::skipped:
        ++p.skipped;
        break;
      case PointState::refused:
        ++p.refused;
        break;
    }
  }
  return p;
}

int64_t SweepStore::create(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                           const std::string& source, const std::string& owner) {
  int64_t id = 0;
  const QString& path = store_.path();
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, path);
    q.run("SELECT state FROM sweeps WHERE name = ?", {qs(spec.name)});
    if (q.next())
      throw StoreError("a sweep named \"" + spec.name + "\" exists already (" + ss(q.at(0)) +
                       "); give this one another name");
    const auto now = number(now_ms());
    q.run(
        "INSERT INTO sweeps (name, spec_json, source, state, created_ms, owner, owner_seen_ms) "
        "VALUES (?, ?, ?, 'running', ?, ?, ?)",
        {qs(spec.name), qs(sweep_to_json(spec)), qs(source), now, qs(owner), now});
    q.run("SELECT id FROM sweeps WHERE name = ?", {qs(spec.name)});
    if (q.next()) id = q.at(0).toLongLong();
    for (const auto& point : points) {
      std::string reason;
      for (const auto& problem : point.problems) reason += (reason.empty() ? "" : "\n") + problem;
      q.run(
          "INSERT INTO sweep_points (sweep_id, idx, values_json, coords_json, repetition, "
          "config_json, state, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
          {number(id), number(point.index), qs(point.values_json),
           qs(nlohmann::json(point.coords).dump()), number(point.repeat), qs(point.config_json),
           point.refused() ? "refused" : "queued", qs(reason)});
    }
  });
  return id;
}

std::vector<SweepRow> SweepStore::sweeps() const {
  std::vector<SweepRow> rows;
  store_.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(QString("SELECT %1 FROM sweeps ORDER BY created_ms, id").arg(kSweepColumns));
    while (q.next()) rows.push_back(sweep_of(q));
  });
  return rows;
}

std::optional<SweepRow> SweepStore::sweep(const std::string& name) const {
  std::optional<SweepRow> row;
  store_.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(QString("SELECT %1 FROM sweeps WHERE name = ?").arg(kSweepColumns), {qs(name)});
    if (q.next()) row = sweep_of(q);
  });
  return row;
}

std::vector<SweepPointRow> SweepStore::points(int64_t sweep_id) const {
  std::vector<SweepPointRow> rows;
  store_.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(QString("SELECT %1 FROM sweep_points WHERE sweep_id = ? ORDER BY idx").arg(kPointColumns),
          {number(sweep_id)});
    while (q.next()) rows.push_back(point_of(q));
  });
  return rows;
}

std::optional<SweepPointRow> SweepStore::point_of_run(const std::string& run) const {
  std::optional<SweepPointRow> row;
  if (run.empty()) return row;
  store_.read_only([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(QString("SELECT %1 FROM sweep_points WHERE run_id = ?").arg(kPointColumns), {qs(run)});
    if (q.next()) row = point_of(q);
  });
  return row;
}

bool SweepStore::take_ownership(
    int64_t sweep, const std::string& owner,
    const std::function<bool(const std::string& owner, int64_t seen_ms)>& is_alive,
    std::string* holder) {
  bool taken = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run("SELECT state, owner, owner_seen_ms FROM sweeps WHERE id = ?", {number(sweep)});
    if (!q.next() || ss(q.at(0)) != "running") return;
    const std::string current = ss(q.at(1));
    if (!current.empty() && current != owner && is_alive(current, q.at(2).toLongLong())) {
      if (holder) *holder = current;
      return;
    }
    q.run("UPDATE sweeps SET owner = ?, owner_seen_ms = ? WHERE id = ? AND owner = ?",
          {qs(owner), number(now_ms()), number(sweep), qs(current)});
    taken = q.changed() == 1;
  });
  return taken;
}

bool SweepStore::renew_ownership(int64_t sweep, const std::string& owner) {
  bool owned = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run("UPDATE sweeps SET owner_seen_ms = ? WHERE id = ? AND owner = ?",
          {number(now_ms()), number(sweep), qs(owner)});
    owned = q.changed() == 1;
  });
  return owned;
}

void SweepStore::release_ownership(int64_t sweep, const std::string& owner) {
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery(db, store_.path())
        .run("UPDATE sweeps SET owner = '', owner_seen_ms = NULL WHERE id = ? AND owner = ?",
             {number(sweep), qs(owner)});
  });
}

bool SweepStore::claim(int64_t sweep, int64_t index, const std::string& run_id,
                       const std::string& owner) {
  bool claimed = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(
        "UPDATE sweep_points SET state = 'running', run_id = ?, started_ms = ? "
        "WHERE sweep_id = ? AND idx = ? AND state = 'queued' AND EXISTS (SELECT 1 FROM sweeps "
        "WHERE id = ? AND state = 'running' AND owner = ?)",
        {qs(run_id), number(now_ms()), number(sweep), number(index), number(sweep), qs(owner)});
    claimed = q.changed() == 1;
  });
  return claimed;
}

bool SweepStore::requeue(int64_t sweep, int64_t index) {
  bool moved = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(
        "UPDATE sweep_points SET state = 'queued', run_id = '', started_ms = NULL "
        "WHERE sweep_id = ? AND idx = ? AND state = 'running'",
        {number(sweep), number(index)});
    moved = q.changed() == 1;
  });
  return moved;
}

bool SweepStore::end_point(int64_t sweep, int64_t index, PointState state,
                           const std::string& reason) {
  bool moved = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(
        "UPDATE sweep_points SET state = ?, reason = ?, ended_ms = ? "
        "WHERE sweep_id = ? AND idx = ? AND state = 'running'",
        {qs(std::string(name_of(state))), qs(reason), number(now_ms()), number(sweep),
         number(index)});
    moved = q.changed() == 1;
  });
  return moved;
}

std::vector<int64_t> SweepStore::skip(int64_t sweep, const std::vector<DroppedPoint>& points) {
  std::vector<int64_t> skipped;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    const auto now = number(now_ms());
    for (const auto& point : points) {
      q.run(
          "UPDATE sweep_points SET state = 'skipped', reason = ?, ended_ms = ? "
          "WHERE sweep_id = ? AND idx = ? AND state = 'queued'",
          {qs(point.reason), now, number(sweep), number(point.index)});
      if (q.changed() == 1) skipped.push_back(point.index);
    }
  });
  return skipped;
}

bool SweepStore::finish_if_done(int64_t sweep) {
  bool finished = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    q.run(
        "UPDATE sweeps SET state = 'finished', ended_ms = ?, owner = '', owner_seen_ms = NULL "
        "WHERE id = ? AND state = 'running' AND NOT EXISTS (SELECT 1 FROM sweep_points WHERE "
        "sweep_id = ? AND state IN ('queued', 'running'))",
        {number(now_ms()), number(sweep), number(sweep)});
    finished = q.changed() == 1;
  });
  return finished;
}

bool SweepStore::kill(int64_t sweep, const std::string& reason) {
  bool killed = false;
  store_.write_transaction([&](QSqlDatabase& db) {
    SqlQuery q(db, store_.path());
    const auto now = number(now_ms());
    q.run(
        "UPDATE sweeps SET state = 'killed', reason = ?, ended_ms = ? "
        "WHERE id = ? AND state = 'running'",
        {qs(reason), now, number(sweep)});
    killed = q.changed() == 1;
    if (!killed) return;
    q.run(
        "UPDATE sweep_points SET state = 'skipped', reason = ?, ended_ms = ? "
        "WHERE sweep_id = ? AND state = 'queued'",
        {qs("the sweep was killed"), now, number(sweep)});
  });
  return killed;
}

}  // namespace flotilla::controller
