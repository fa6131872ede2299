#include "flotilla/controller/store.h"

#include <QDir>
#include <QFileInfo>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QSqlRecord>
#include <QVariant>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "migrations.h"
#include "sql_query.h"
#include "store_file.h"

namespace flotilla::controller {

// Each reading thread's connection to one store.
struct StoreReaders {
  struct Reader {
    QSqlDatabase db;
    int64_t serial = 0;
  };
  std::mutex mutex;
  std::map<std::thread::id, Reader> by_thread;

  // Closes the connection `thread` opened (its copy of the handle goes first,
  // so that QtSql closes it without "still in use").
  void close(std::thread::id thread) {
    QString name;
    {
      std::lock_guard lock(mutex);
      const auto it = by_thread.find(thread);
      if (it == by_thread.end()) return;
      name = it->second.db.connectionName();
      by_thread.erase(it);
    }
    QSqlDatabase::removeDatabase(name);
  }
  void close_all() {
    std::vector<QString> names;
    {
      std::lock_guard lock(mutex);
      for (const auto& [thread, reader] : by_thread) names.push_back(reader.db.connectionName());
      by_thread.clear();
    }
    for (const auto& name : names) QSqlDatabase::removeDatabase(name);
  }
};

namespace {

// The stores a thread has read from: their connections of this thread are
// closed when it ends (a store that went first closed them itself).
struct ThreadReaders {
  std::vector<std::weak_ptr<StoreReaders>> used;
  ~ThreadReaders() {
    for (const auto& weak : used)
      if (const auto readers = weak.lock()) readers->close(std::this_thread::get_id());
  }
};
thread_local ThreadReaders thread_readers;

std::atomic<int64_t> connection_counter{0};

QString unique_connection_name(const char* role) {
  return QStringLiteral("flotilla-%1-%2").arg(role).arg(connection_counter++);
}

QVariant optional_value(const std::optional<int64_t>& v) {
  return v ? QVariant::fromValue<qlonglong>(*v) : QVariant();
}

std::optional<int64_t> optional_of(const QVariant& v) {
  if (v.isNull()) return std::nullopt;
  return v.toLongLong();
}

using Sql = SqlQuery;

const char* kRunColumns =
    "id, experiment_id, experiment_name, config_json, world_size, state, reason, "
    "created_ms, starting_ms, running_ms, ended_ms";

RunRow run_of(const Sql& q) {
  RunRow r;
  r.id = ss(q.at(0));
  r.experiment_id = optional_of(q.at(1));
  r.experiment_name = ss(q.at(2));
  r.config_json = ss(q.at(3));
  r.world_size = q.at(4).toLongLong();
  r.state = run_state_from_name(ss(q.at(5))).value_or(RunState::failed);
  r.reason = ss(q.at(6));
  r.created_ms = q.at(7).toLongLong();
  r.starting_ms = optional_of(q.at(8));
  r.running_ms = optional_of(q.at(9));
  r.ended_ms = optional_of(q.at(10));
  return r;
}

// Runs as the query `sql` lists them, each with its nodes in rank order.
std::vector<RunRow> runs_with_nodes(Sql& q, const QString& sql, const QVariantList& binds = {}) {
  std::vector<RunRow> rows;
  q.run(sql, binds);
  while (q.next()) rows.push_back(run_of(q));
  if (rows.empty()) return rows;
  std::map<std::string, RunRow*> by_id;
  for (auto& r : rows) by_id[r.id] = &r;
  // One query for the listed runs' nodes; a long list reads them all rather
  // than binding more parameters than SQLite allows.
  constexpr size_t kMostBound = 500;
  QString placeholders;
  QVariantList ids;
  for (const auto& r : rows) {
    placeholders += placeholders.isEmpty() ? "?" : ", ?";
    ids << qs(r.id);
  }
  if (rows.size() > kMostBound)
    q.run("SELECT run_id, node FROM run_nodes ORDER BY run_id, position");
  else
    q.run("SELECT run_id, node FROM run_nodes WHERE run_id IN (" + placeholders +
              ") ORDER BY run_id, position",
          ids);
  while (q.next())
    if (auto it = by_id.find(ss(q.at(0))); it != by_id.end())
      it->second->nodes.push_back(ss(q.at(1)));
  return rows;
}

const char* kLiveStates = "('created', 'starting', 'running')";

}  // namespace

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Store::Store(QString path, StoreOptions options, StoreAccess access)
    : path_(std::move(path)),
      options_(options),
      access_(access),
      readers_(std::make_shared<StoreReaders>()) {
  const QFileInfo info(path_);
  // Before any connection: SQLite would write over some damaged files.
  file_claim_ = claim_database_file(path_);
  if (access_ == StoreAccess::read_only) {
    try {
      check_schema_for_reading();
    } catch (const StoreError& e) {
      throw StoreError(with_damage_advice(e.what()));
    }
    return;
  }
  if (!QDir().mkpath(info.absolutePath()))
    throw StoreError("cannot create the directory of database " + path_.toStdString());
  writer_connection_ = unique_connection_name("write");
  auto ready = writer_ready_.get_future();
  writer_ = std::thread([this] { writer_loop(); });
  ready.wait();
  if (!open_error_.empty()) {
    writer_.join();
    throw StoreError(with_damage_advice(open_error_));
  }
}

Store::~Store() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  room_.notify_all();
  if (writer_.joinable()) writer_.join();
  // Before the file claim goes: no connection of this store outlives it.
  readers_->close_all();
}

int Store::latest_schema_version() {
  return latest_migration();
}

std::pair<QSqlDatabase, int64_t> Store::reader() const {
  const auto thread = std::this_thread::get_id();
  {
    std::lock_guard lock(readers_->mutex);
    if (const auto it = readers_->by_thread.find(thread); it != readers_->by_thread.end())
      return {it->second.db, it->second.serial};
  }
  const int64_t serial = connection_counter++;
  const QString name = QStringLiteral("flotilla-read-%1").arg(serial);
  QSqlDatabase db = QSqlDatabase::addDatabase("QSQLITE", name);
  try {
    open_connection(db, path_, true, options_.busy_timeout);
  } catch (...) {
    db = QSqlDatabase();
    QSqlDatabase::removeDatabase(name);
    throw;
  }
  {
    std::lock_guard lock(readers_->mutex);
    readers_->by_thread[thread] = {db, serial};
  }
  // Once per store: a thread that reopens after a failed read (a poll of a
  // damaged file, every few seconds) must not add an entry each time.
  auto& used = thread_readers.used;
  used.erase(std::remove_if(used.begin(), used.end(),
                            [&](const auto& w) { return w.expired() || w.lock() == readers_; }),
             used.end());
  used.push_back(readers_);
  return {db, serial};
}

void Store::drop_reader() const {
  readers_->close(std::this_thread::get_id());
}

template <typename F>
auto Store::with_reader(F&& read) const {
  try {
    auto [db, serial] = reader();
    Sql q(db, path_);
    return read(q);
  } catch (const StoreError&) {
    drop_reader();
    throw;
  }
}

void Store::check_schema_for_reading() const {
  const QFileInfo info(path_);
  if (!info.isFile()) throw StoreError("no database at " + path_.toStdString());
  const int version = with_reader([](Sql& q) {
    q.run("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    if (!q.next()) return 0;
    q.run("SELECT version FROM schema_version");
    return q.next() ? q.at(0).toInt() : 0;
  });
  const int latest = latest_migration();
  if (version > latest)
    throw StoreError("database " + path_.toStdString() + " has schema version " +
                     std::to_string(version) + ", newer than this Flotilla's " +
                     std::to_string(latest) + "; use a newer Flotilla");
  std::vector<QString> missing;
  read_only([&](QSqlDatabase& db) { missing = missing_migrations(db); });
  if (version < latest || !missing.empty()) {
    std::string names;
    for (const auto& name : missing) names += (names.empty() ? "" : ", ") + name.toStdString();
    throw StoreError("database " + path_.toStdString() + " has schema version " +
                     std::to_string(version) + " without migration" +
                     (missing.size() == 1 ? " " : "s ") + names + " of this Flotilla's " +
                     std::to_string(latest) +
                     "; a view does not migrate it: run any flotilla command on it once "
                     "(e.g. `flotilla --db " +
                     path_.toStdString() + " runs`), which does");
  }
}

void Store::read_only(const std::function<void(QSqlDatabase&)>& read) const {
  try {
    auto [db, serial] = reader();
    read(db);
  } catch (const StoreError&) {
    drop_reader();
    throw;
  }
}

int64_t Store::data_version() const {
  try {
    auto [db, serial] = reader();
    Sql q(db, path_);
    q.run("PRAGMA data_version");
    const int64_t version = q.next() ? q.at(0).toLongLong() : 0;
    return (serial << 32) ^ version;
  } catch (const StoreError&) {
    drop_reader();
    throw;
  }
}

void Store::write_transaction(const std::function<void(QSqlDatabase&)>& write) {
  write_and_wait(write);
}

int Store::schema_version() const {
  return with_reader([](Sql& q) {
    q.run("SELECT version FROM schema_version");
    return q.next() ? q.at(0).toInt() : 0;
  });
}

namespace {
const char* kExperimentColumns = "id, name, config_json, created_ms, updated_ms";
ExperimentRow experiment_of(const Sql& q) {
  return {q.at(0).toLongLong(), ss(q.at(1)), ss(q.at(2)), q.at(3).toLongLong(),
          q.at(4).toLongLong()};
}
}  // namespace

std::vector<ExperimentRow> Store::experiments() const {
  return with_reader([](Sql& q) {
    std::vector<ExperimentRow> rows;
    q.run(QString("SELECT %1 FROM experiments ORDER BY name").arg(kExperimentColumns));
    while (q.next()) rows.push_back(experiment_of(q));
    return rows;
  });
}

std::optional<ExperimentRow> Store::experiment(const std::string& name) const {
  return with_reader([&](Sql& q) -> std::optional<ExperimentRow> {
    q.run(QString("SELECT %1 FROM experiments WHERE name = ?").arg(kExperimentColumns), {qs(name)});
    if (!q.next()) return std::nullopt;
    return experiment_of(q);
  });
}

std::vector<RunRow> Store::runs() const {
  return with_reader([](Sql& q) {
    return runs_with_nodes(q,
                           QString("SELECT %1 FROM runs ORDER BY created_ms, id").arg(kRunColumns));
  });
}

std::optional<RunRow> Store::run(const std::string& id) const {
  return with_reader([&](Sql& q) -> std::optional<RunRow> {
    auto rows =
        runs_with_nodes(q, QString("SELECT %1 FROM runs WHERE id = ?").arg(kRunColumns), {qs(id)});
    if (rows.empty()) return std::nullopt;
    return std::move(rows.front());
  });
}

std::vector<RunRow> Store::live_runs() const {
  return with_reader([](Sql& q) {
    return runs_with_nodes(q, QString("SELECT %1 FROM runs WHERE state IN %2 ORDER BY created_ms")
                                  .arg(kRunColumns, kLiveStates));
  });
}

std::vector<std::string> Store::live_runs_on(const std::string& node) const {
  return with_reader([&](Sql& q) {
    std::vector<std::string> ids;
    q.run(QString("SELECT r.id FROM runs r JOIN run_nodes n ON n.run_id = r.id "
                  "WHERE n.node = ? AND r.state IN %1 ORDER BY r.created_ms")
              .arg(kLiveStates),
          {qs(node)});
    while (q.next()) ids.push_back(ss(q.at(0)));
    return ids;
  });
}

std::vector<StepBucketRow> Store::step_buckets(const std::string& run) const {
  return with_reader([&](Sql& q) {
    std::vector<StepBucketRow> rows;
    q.run("SELECT * FROM step_buckets WHERE run_id = ? ORDER BY rank, bucket", {qs(run)});
    // After run_id, rank, bucket and records, four columns a field:
    // <field>_min, _max, _sum, _n.
    const QSqlRecord columns = q.record();
    std::vector<std::string> fields;
    for (int c = 4; c + 3 < columns.count(); c += 4)
      fields.push_back(columns.fieldName(c).chopped(4).toStdString());
    while (q.next()) {
      StepBucketRow row;
      row.rank = q.at(1).toLongLong();
      row.bucket = q.at(2).toLongLong();
      row.records = q.at(3).toLongLong();
      for (size_t f = 0; f < fields.size(); ++f) {
        const int c = 4 + 4 * int(f);
        const int64_t count = q.at(c + 3).toLongLong();
        if (count > 0)
          row.fields[fields[f]] = {q.at(c).toDouble(), q.at(c + 1).toDouble(),
                                   q.at(c + 2).toDouble(), count};
      }
      rows.push_back(std::move(row));
    }
    return rows;
  });
}

std::vector<RecordRow> Store::records(const std::string& run, int64_t after_seq) const {
  return records(run, RecordFilter{}, after_seq);
}

namespace {
// The records query for `filter`. With a type, the (run, type, rank) index
// is named: without statistics SQLite's planner prefers the primary key,
// which reads every record of the run to find one rank's steps. The index
// ends with the primary key (node, seq), so a rank's records come out in
// order without a sort.
std::pair<QString, QVariantList> records_query(const std::string& run, const RecordFilter& filter,
                                               int64_t after_seq) {
  QString sql =
      QString("SELECT seq, node, rank, type, body FROM records%1 WHERE run_id = ? AND seq > ?")
          .arg(filter.type ? " INDEXED BY records_by_type_rank" : "");
  QVariantList binds{qs(run), QVariant::fromValue<qlonglong>(after_seq)};
  if (filter.type) {
    sql += " AND type = ?";
    binds << qs(*filter.type);
  }
  if (filter.rank) {
    sql += " AND rank = ?";
    binds << QVariant::fromValue<qlonglong>(*filter.rank);
  }
  if (filter.node) {
    sql += " AND node = ?";
    binds << qs(*filter.node);
  }
  return {sql + " ORDER BY node, seq", binds};
}
}  // namespace

std::vector<RecordRow> Store::records(const std::string& run, const RecordFilter& filter,
                                      int64_t after_seq) const {
  return with_reader([&](Sql& q) {
    const auto [sql, binds] = records_query(run, filter, after_seq);
    q.run(sql, binds);
    std::vector<RecordRow> rows;
    while (q.next())
      rows.push_back(
          {q.at(0).toLongLong(), ss(q.at(1)), q.at(2).toLongLong(), ss(q.at(3)), ss(q.at(4))});
    return rows;
  });
}

std::vector<RecordRow> Store::records_page(const std::string& run, const std::string& after_node,
                                           int64_t after_seq, int64_t limit) const {
  return with_reader([&](Sql& q) {
    // A row-value range on the primary key (run_id, node, seq): each page
    // starts where the last ended instead of reading the run from its start.
    q.run(
        "SELECT seq, node, rank, type, body FROM records WHERE run_id = ? AND (node, seq) > (?, ?)"
        " ORDER BY node, seq LIMIT ?",
        {qs(run), qs(after_node), QVariant::fromValue<qlonglong>(after_seq),
         QVariant::fromValue<qlonglong>(limit)});
    std::vector<RecordRow> rows;
    while (q.next())
      rows.push_back(
          {q.at(0).toLongLong(), ss(q.at(1)), q.at(2).toLongLong(), ss(q.at(3)), ss(q.at(4))});
    return rows;
  });
}

std::string Store::records_query_plan(const std::string& run, const RecordFilter& filter) const {
  return with_reader([&](Sql& q) {
    const auto [sql, binds] = records_query(run, filter, 0);
    q.run("EXPLAIN QUERY PLAN " + sql, binds);
    std::string plan;
    while (q.next()) plan += ss(q.at(3)) + "\n";
    return plan;
  });
}

int64_t Store::last_seq(const std::string& run, const std::string& node) const {
  return with_reader([&](Sql& q) {
    q.run("SELECT COALESCE(MAX(seq), 0) FROM records WHERE run_id = ? AND node = ?",
          {qs(run), qs(node)});
    return q.next() ? q.at(0).toLongLong() : int64_t{0};
  });
}

std::vector<TransitionRow> Store::transitions(const std::string& run) const {
  return with_reader([&](Sql& q) {
    std::vector<TransitionRow> rows;
    q.run("SELECT state, at_ms, reason FROM run_transitions WHERE run_id = ? ORDER BY rowid",
          {qs(run)});
    while (q.next())
      rows.push_back({run_state_from_name(ss(q.at(0))).value_or(RunState::failed),
                      q.at(1).toLongLong(), ss(q.at(2))});
    return rows;
  });
}

std::vector<std::string> Store::node_names() const {
  return with_reader([](Sql& q) {
    std::vector<std::string> names;
    q.run("SELECT name FROM nodes ORDER BY name");
    while (q.next()) names.push_back(ss(q.at(0)));
    return names;
  });
}

namespace {
constexpr const char* kNodeColumns =
    "name, host, port, user, key_file, remote_dir, tags, agent_path, probe_json, probed_ms, kind, "
    "slurm_partition, slurm_account, torch_prefix, engine_json";
NodeRow node_at(Sql& q) {
  NodeRow n;
  n.name = ss(q.at(0));
  n.host = ss(q.at(1));
  n.port = q.at(2).toInt();
  n.user = ss(q.at(3));
  n.key_file = ss(q.at(4));
  n.remote_dir = ss(q.at(5));
  n.tags = ss(q.at(6));
  n.agent_path = ss(q.at(7));
  n.probe_json = ss(q.at(8));
  if (!q.at(9).isNull()) n.probed_ms = q.at(9).toLongLong();
  n.kind = ss(q.at(10)) == "slurm" ? NodeKind::slurm : NodeKind::ssh;
  n.slurm_partition = ss(q.at(11));
  n.slurm_account = ss(q.at(12));
  n.torch_prefix = ss(q.at(13));
  n.engine_json = ss(q.at(14));
  return n;
}
}  // namespace

std::vector<NodeRow> Store::nodes() const {
  return with_reader([](Sql& q) {
    std::vector<NodeRow> nodes;
    q.run(QString("SELECT %1 FROM nodes ORDER BY name").arg(kNodeColumns));
    while (q.next()) nodes.push_back(node_at(q));
    return nodes;
  });
}

std::optional<NodeRow> Store::node(const std::string& name) const {
  return with_reader([&](Sql& q) -> std::optional<NodeRow> {
    q.run(QString("SELECT %1 FROM nodes WHERE name = ?").arg(kNodeColumns), {qs(name)});
    if (!q.next()) return std::nullopt;
    return node_at(q);
  });
}

void Store::add_node(const NodeRow& n) {
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    q.run("SELECT 1 FROM nodes WHERE name = ?", {qs(n.name)});
    if (q.next()) throw StoreError("node \"" + n.name + "\" exists already");
    q.run(
        "INSERT INTO nodes (name, host, port, user, key_file, remote_dir, tags, agent_path, kind, "
        "slurm_partition, slurm_account, torch_prefix) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        {qs(n.name), qs(n.host), n.port, qs(n.user), qs(n.key_file), qs(n.remote_dir), qs(n.tags),
         qs(n.agent_path), qs(node_kind_name(n.kind)), qs(n.slurm_partition), qs(n.slurm_account),
         qs(n.torch_prefix)});
  });
}

void Store::remove_node(const std::string& name) {
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    q.run("SELECT 1 FROM nodes WHERE name = ?", {qs(name)});
    if (!q.next()) throw StoreError("no node \"" + name + "\"");
    q.run(QString("SELECT r.id FROM runs r JOIN run_nodes n ON n.run_id = r.id "
                  "WHERE n.node = ? AND r.state IN %1")
              .arg(kLiveStates),
          {qs(name)});
    if (q.next())
      throw StoreError("node \"" + name + "\" is in use by live run " + ss(q.at(0)) +
                       "; kill it or let it end first");
    q.run("DELETE FROM nodes WHERE name = ?", {qs(name)});
  });
}

void Store::update_node(const NodeRow& n) {
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    q.run("SELECT 1 FROM nodes WHERE name = ?", {qs(n.name)});
    if (!q.next()) throw StoreError("no node \"" + n.name + "\"");
    q.run(QString("SELECT r.id FROM runs r JOIN run_nodes n ON n.run_id = r.id "
                  "WHERE n.node = ? AND r.state IN %1")
              .arg(kLiveStates),
          {qs(n.name)});
    // A live run reconnects and stops through these fields.
    if (q.next())
      throw StoreError("node \"" + n.name + "\" is in use by live run " + ss(q.at(0)) +
                       "; kill it or let it end before changing how it is reached");
    q.run(
        "UPDATE nodes SET host = ?, port = ?, user = ?, key_file = ?, remote_dir = ?, tags = ?, "
        "agent_path = ?, kind = ?, slurm_partition = ?, slurm_account = ?, torch_prefix = ? "
        "WHERE name = ?",
        {qs(n.host), n.port, qs(n.user), qs(n.key_file), qs(n.remote_dir), qs(n.tags),
         qs(n.agent_path), qs(node_kind_name(n.kind)), qs(n.slurm_partition), qs(n.slurm_account),
         qs(n.torch_prefix), qs(n.name)});
  });
}

void Store::save_engine(const std::string& name, const std::string& engine_json) {
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    q.run("UPDATE nodes SET engine_json = ? WHERE name = ?", {qs(engine_json), qs(name)});
  });
}

void Store::save_probe(const std::string& name, const std::string& probe_json) {
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    q.run("UPDATE nodes SET probe_json = ?, probed_ms = ? WHERE name = ?",
          {qs(probe_json), QVariant::fromValue<qlonglong>(now_ms()), qs(name)});
  });
}

int64_t Store::save_experiment(const std::string& name, const std::string& config_json) {
  int64_t id = 0;
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    const auto now = QVariant::fromValue<qlonglong>(now_ms());
    q.run(
        "INSERT INTO experiments (name, config_json, created_ms, updated_ms) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET config_json = excluded.config_json, "
        "updated_ms = excluded.updated_ms",
        {qs(name), qs(config_json), now, now});
    q.run("SELECT id FROM experiments WHERE name = ?", {qs(name)});
    if (q.next()) id = q.at(0).toLongLong();
  });
  return id;
}

void Store::create_run(const RunRow& r) {
  write_and_wait([&](QSqlDatabase& db) {
    Sql q(db, path_);
    q.run(
        "INSERT INTO runs (id, experiment_id, experiment_name, config_json, world_size, "
        "state, reason, created_ms) VALUES (?, ?, ?, ?, ?, 'created', ?, ?)",
        {qs(r.id), optional_value(r.experiment_id), qs(r.experiment_name), qs(r.config_json),
         QVariant::fromValue<qlonglong>(r.world_size), qs(r.reason),
         QVariant::fromValue<qlonglong>(r.created_ms)});
    for (size_t i = 0; i < r.nodes.size(); ++i)
      q.run("INSERT INTO run_nodes (run_id, position, node) VALUES (?, ?, ?)",
            {qs(r.id), QVariant::fromValue<qlonglong>(static_cast<qlonglong>(i)), qs(r.nodes[i])});
    q.run("INSERT INTO run_transitions (run_id, state, at_ms, reason) VALUES (?, 'created', ?, ?)",
          {qs(r.id), QVariant::fromValue<qlonglong>(r.created_ms), qs(r.reason)});
  });
}

bool Store::move_stored_run(const std::string& run, RunState to, const std::string& reason,
                            const std::function<bool(RunState)>& allowed_from,
                            const QString& times) {
  bool moved = false;
  write_and_wait([&](QSqlDatabase& db) {
    moved = false;  // a batch the database refused is tried again from the start
    Sql q(db, path_);
    q.run("SELECT state FROM runs WHERE id = ?", {qs(run)});
    if (!q.next()) throw StoreError("no run \"" + run + "\" in " + path_.toStdString());
    // A state this Flotilla does not know is left alone.
    const auto from = run_state_from_name(ss(q.at(0)));
    if (!from || !allowed_from(*from)) return;
    const auto at = QVariant::fromValue<qlonglong>(now_ms());
    const QString state = qs(std::string(name_of(to)));
    q.run("UPDATE runs SET state = ?, reason = ?, " + times + " WHERE id = ?",
          {state, qs(reason), at, qs(run)});
    q.run("INSERT INTO run_transitions (run_id, state, at_ms, reason) VALUES (?, ?, ?, ?)",
          {qs(run), state, at, qs(reason)});
    moved = true;
  });
  return moved;
}

bool Store::transition(const std::string& run, RunState to, const std::string& reason) {
  // A queued run keeps the time it started at (the time binds to nothing new).
  const QString times = to == RunState::starting  ? "starting_ms = ?"
                        : to == RunState::queued  ? "starting_ms = COALESCE(starting_ms, ?)"
                        : to == RunState::running ? "running_ms = ?"
                                                  : "ended_ms = ?";
  return move_stored_run(
      run, to, reason, [to](RunState from) { return can_transition(from, to); }, times);
}

bool Store::reopen(const std::string& run, const std::string& reason) {
  return move_stored_run(
      run, RunState::starting, reason,
      [](RunState from) { return is_terminal(from) && from != RunState::finished; },
      "starting_ms = ?, running_ms = NULL, ended_ms = NULL");
}

int64_t Store::attempts(const std::string& run) const {
  return with_reader([&](Sql& q) -> int64_t {
    q.run("SELECT COUNT(*) FROM run_transitions WHERE run_id = ? AND state = 'starting'",
          {qs(run)});
    return q.next() ? std::max<int64_t>(1, q.at(0).toLongLong()) : 1;
  });
}

void Store::check_writable() const {
  if (access_ == StoreAccess::read_only)
    throw StoreError("database " + path_.toStdString() +
                     " is open read-only (for a view): nothing is written to it");
}

}  // namespace flotilla::controller
