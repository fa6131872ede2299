// The ingest benchmark (issue 15, Load): step records end to end from a node's
// agent to rows committed in the controller's SQLite database, in records per
// second (goal >= 200,000/s), and where the time goes. Measured and printed,
// never asserted.
//
// For each N it writes a run directory whose spool holds N step records of a
// 4-rank DDP run (each record as a rank prints it, checked and timestamped by
// the agent's own rank-line reader, wrapped and numbered by the agent's
// SpoolWriter as the supervisor does) and the run's end, then times:
//  1. decode: the spool read in 64 KiB chunks, split into lines and decoded
//     into store rows, as the controller's link reader does;
//  2. store: Store::append_record for each row (the queue), then flush until
//     committed (the writer thread: SQLite inserts, the step buckets, the
//     commit);
//  3. the writer's parts, inside one of the store's write transactions: the
//     store's INSERT for every row, the step numbers read from the bodies,
//     the buckets folded and upserted, the COMMIT, each timed apart; and the
//     same INSERT through QtSql, as the writer made it before;
//  4. end to end: a real flotilla-agent on the local transport follows the
//     run (Controller::attach, a Resume from seq 0), streams the spool over
//     its stdout pipe, and the controller decodes and stores it: from the
//     first record received to the run's end stored (which is committed
//     behind every record), then the rows counted in SQLite.
// Usage: ingest_bench [N ...]   (default: 100000 1000000)
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QVariant>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/line_buffer.h"
#include "flotilla/protocol/messages.h"
#include "flotilla/protocol/metric_records.h"
#include "rank_records.h"
#include "run_directory.h"
#include "spool.h"
#include "store_buckets.h"
#include "store_insert.h"

namespace {

namespace fs = std::filesystem;
using flotilla::controller::Controller;
using flotilla::controller::ControllerObserver;
using flotilla::controller::ControllerOptions;
using flotilla::controller::RecordInsert;
using flotilla::controller::RecordRow;
using flotilla::controller::RunRow;
using flotilla::controller::RunState;
using flotilla::controller::StepBucketBatch;
using flotilla::controller::StepNumberReader;
using flotilla::controller::Store;
namespace protocol = flotilla::protocol;
namespace records = flotilla::records;

constexpr int64_t kRanks = 4;
const std::string kRun = "ingest";

double seconds(const QElapsedTimer& t) {
  return double(t.nsecsElapsed()) / 1e9;
}

// What rank `rank` of a 4-rank DDP run of a small CNN prints after step `step`.
std::string ddp_step_line(int64_t rank, int64_t step) {
  const double jitter = std::sin(double(step) * 0.37 + double(rank));
  records::Step s;
  s.rank = rank;
  s.epoch = step / 782;
  s.step = step;
  s.samples = 256;
  s.loss = 2.3 / (1 + 0.001 * double(step)) + 0.01 * jitter;
  s.lr = 0.05;
  s.data_ms = 0.4 + 0.05 * jitter;
  s.forward_ms = 6.1 + 0.3 * jitter;
  s.backward_ms = 11.8 + 0.4 * jitter;
  s.comm_ms = 1.2 + 0.2 * jitter;
  s.comm_busy_ms = 7.5 + 0.5 * jitter;
  s.optimizer_ms = 0.7;
  s.step_ms = s.data_ms + s.forward_ms + s.backward_ms + s.comm_ms + s.optimizer_ms;
  s.samples_per_s = double(s.samples) * 1000 / s.step_ms;
  s.bytes_sent = 1686568;
  s.bytes_recv = 1686568;
  s.algbw_gbps = 0.9 + 0.05 * jitter;
  s.busbw_gbps = s.algbw_gbps * 1.5;
  s.comm_per_s = 41;
  s.mem_alloc = 48234496;
  s.mem_reserved = 67108864;
  s.mem_peak = 61865984;
  return records::to_line(s);
}

// The run directory a supervisor would leave behind for a finished run:
// its start request, N step records and the run's end in the spool, and
// its final state. Returns the spool's size in bytes.
uintmax_t write_run_directory(const fs::path& home, int64_t n) {
  flotilla::agent::RunDirectory dir(home, kRun);
  fs::create_directories(dir.path());
  protocol::StartRun start;
  start.run = kRun;
  start.node = "local";
  start.config_json = R"({"name":"ingest","strategy":"ddp","device":"cpu"})";  // a JSON object
  for (int64_t r = 0; r < kRanks; ++r) start.ranks.push_back(r);
  dir.write_start(start);
  {
    flotilla::agent::SpoolWriter spool(dir.spool());
    const double t0 = 1.7e9;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t rank = i % kRanks, step = i / kRanks + 1;
      auto line = flotilla::agent::read_rank_line(ddp_step_line(rank, step), t0 + double(i) * 1e-3);
      if (!line) throw std::logic_error("the agent refuses the bench's step record");
      spool.append(protocol::encode(protocol::Record{
          kRun, spool.next_seq(), "local", rank, std::move(line->record_json), {}}));
    }
    spool.append(protocol::encode(
        protocol::RunEnd{kRun, spool.next_seq(), "finished", "every rank finished"}));
    dir.write_final({"finished", "every rank finished", spool.last_seq()});
  }
  return fs::file_size(dir.spool());
}

// 1. The spool as the controller's link reader sees it: 64 KiB reads, lines,
// decode, the store's row (Controller::handle).
std::vector<RecordRow> decode_spool(const fs::path& spool, double& elapsed) {
  std::vector<RecordRow> rows;
  std::ifstream in(spool, std::ios::binary);
  protocol::LineBuffer lines;
  std::vector<char> buffer(1 << 16);
  QElapsedTimer t;
  t.start();
  while (in.read(buffer.data(), std::streamsize(buffer.size())) || in.gcount() > 0)
    lines.feed(
        {buffer.data(), size_t(in.gcount())},
        [&](std::string_view line) {
          const auto message = protocol::decode(line);
          if (const auto* r = std::get_if<protocol::Record>(&message))
            rows.push_back({r->seq, r->node, r->rank, r->record_type, r->record_json});
        },
        [](size_t) { throw std::runtime_error("an overlong line in the bench's spool"); });
  elapsed = seconds(t);
  return rows;
}

RunRow a_running_run(Store& store) {
  RunRow run;
  run.id = kRun;
  run.experiment_name = "ingest";
  run.config_json = R"({"name":"ingest","strategy":"ddp","device":"cpu"})";
  run.nodes = {"local"};
  run.world_size = kRanks;
  store.create_run(run);
  store.transition(kRun, RunState::starting);
  store.transition(kRun, RunState::running);
  return run;
}

int64_t stored_records(Store& store) {
  int64_t count = -1;
  store.read_only([&](QSqlDatabase& db) {
    QSqlQuery q(db);
    q.prepare("SELECT count(*) FROM records WHERE run_id = ?");
    q.addBindValue(QString::fromStdString(kRun));
    if (q.exec() && q.next()) count = q.value(0).toLongLong();
  });
  return count;
}

QString db_path(const fs::path& dir, const char* name) {
  return QString::fromStdString((dir / name).string());
}

// 2. The store alone: the controller's calls, with the rows already decoded.
void store_only(const fs::path& dir, const std::vector<RecordRow>& rows) {
  Store store(db_path(dir, "store_only.db"));
  a_running_run(store);
  const int64_t commits_before = store.commits();
  QElapsedTimer t;
  t.start();
  for (const auto& row : rows) store.append_record(kRun, row);
  const double queued = seconds(t);
  store.flush();
  const double committed = seconds(t);
  const auto n = double(rows.size());
  std::printf(
      "2. store: append_record x %zu returned after %.2f s (%.0f/s, the writer already busy\n"
      "   beside it); flush until committed %.2f s: %.0f records/s, in %lld commits\n",
      rows.size(), queued, n / queued, committed, n / committed,
      static_cast<long long>(store.commits() - commits_before));
  if (stored_records(store) != int64_t(rows.size()))
    std::printf("   ! %lld rows stored of %zu\n", static_cast<long long>(stored_records(store)),
                rows.size());
}

// 3. The writer's parts, inside one write transaction of the store: the
// store's INSERT for every row (RecordInsert: SQLite's own interface, UTF-8
// bound as it is), then the step buckets of those rows (each body's numbers
// read, then the buckets folded and upserted as the writer does), then the
// COMMIT, each timed apart. For comparison, the same INSERT through QtSql
// (each text bound through UTF-16), as the writer did it before.
void writer_parts(const fs::path& dir, const std::vector<RecordRow>& rows) {
  Store store(db_path(dir, "writer_parts.db"));
  a_running_run(store);
  QElapsedTimer t;
  double inserted = 0, read = 0, bucketed = 0;
  int64_t steps = 0;
  bool direct = false;
  t.start();
  store.write_transaction([&](QSqlDatabase& db) {
    RecordInsert insert(db, store.path());
    direct = insert.binds_directly();
    for (const auto& r : rows)
      if (insert.insert(kRun, r) != RecordInsert::Outcome::inserted)
        throw std::runtime_error("the bench's insert failed: " + insert.error());
    inserted = seconds(t);
    const StepNumberReader reader(flotilla::controller::step_bucket_fields(db));
    for (const auto& r : rows) steps += reader.read(r.body).has_value();
    read = seconds(t) - inserted;
    StepBucketBatch buckets(db, store.path(), reader);
    for (const auto& r : rows) buckets.add(kRun, r.rank, r.type, r.body);
    buckets.flush();
    bucketed = seconds(t) - inserted - read;
  });
  const double committed = seconds(t);
  const auto n = double(rows.size());
  std::printf(
      "3. the writer's parts in one write transaction of the store:\n"
      "   INSERT (%s) %.2f s (%.0f/s); step numbers read from the bodies %.2f s (%.0f/s, %lld "
      "steps);\n"
      "   buckets (numbers read again, folded, upserted) %.2f s (%.0f/s); COMMIT %.3f s;\n"
      "   all %.2f s: %.0f records/s\n",
      direct ? "SQLite's own interface" : "QtSql: Qt's driver brings its own SQLite", inserted,
      n / inserted, read, n / read, static_cast<long long>(steps), bucketed, n / bucketed,
      committed - inserted - read - bucketed, committed - read, n / (committed - read));
}

void insert_through_qtsql(const fs::path& dir, const std::vector<RecordRow>& rows) {
  Store store(db_path(dir, "qtsql_insert.db"));
  a_running_run(store);
  QElapsedTimer t;
  double inserted = 0;
  t.start();
  store.write_transaction([&](QSqlDatabase& db) {
    RecordInsert insert(db, store.path(), RecordInsert::Binding::qt);
    for (const auto& r : rows)
      if (insert.insert(kRun, r) != RecordInsert::Outcome::inserted)
        throw std::runtime_error("the bench's insert through QtSql failed: " + insert.error());
    inserted = seconds(t);
  });
  std::printf("   the same INSERT through QtSql (texts bound as UTF-16): %.2f s (%.0f/s)\n",
              inserted, double(rows.size()) / inserted);
}

// 4. End to end. Counts what the controller hands the store, and when.
class Arrivals : public ControllerObserver {
 public:
  void record_received(const std::string&, const RecordRow&) override {
    if (received_++ == 0) first_.start();
  }
  void problem(const std::string& message) override {
    std::fprintf(stderr, "   controller: %s\n", message.c_str());
  }
  double since_first() const { return seconds(first_); }
  int64_t received() const { return received_; }

 private:
  std::atomic<int64_t> received_{0};
  QElapsedTimer first_;
};

void end_to_end(const fs::path& dir, int64_t n) {
  Store store(db_path(dir, "end_to_end.db"));
  a_running_run(store);
  ControllerOptions options;
  options.agent_binary = FLOTILLA_AGENT_BINARY;
  Arrivals arrivals;
  QElapsedTimer t;
  double from_first = 0, from_attach = 0;
  {
    Controller controller(store, options);
    controller.set_observer(&arrivals);
    t.start();
    controller.attach(kRun);
    if (!controller.wait_for_end(kRun, std::chrono::minutes(30)))
      throw std::runtime_error("the run's end was not stored within 30 minutes");
    from_first = arrivals.since_first();
    from_attach = seconds(t);
  }
  const int64_t stored = stored_records(store);
  const auto row = store.run(kRun);
  std::printf(
      "4. end to end (agent -> pipe -> decode -> queue -> SQLite): %lld records stored\n"
      "   (%lld step records + the run's end; run %s), first record received to the end\n"
      "   committed %.2f s: %.0f records/s (attach to end %.2f s, agent start and hello\n"
      "   included)\n",
      static_cast<long long>(stored), static_cast<long long>(n),
      row ? std::string(flotilla::controller::name_of(row->state)).c_str() : "missing", from_first,
      double(stored) / from_first, from_attach);
}

void bench(int64_t n) {
  const fs::path dir =
      fs::temp_directory_path() / ("flotilla-ingest-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path home = dir / "agent-home";
  ::setenv("FLOTILLA_HOME", home.c_str(), 1);  // the local agent's run directories

  std::printf("N = %lld step records (4 DDP ranks)\n", static_cast<long long>(n));
  QElapsedTimer writing;
  writing.start();
  const auto spool_bytes = write_run_directory(home, n);
  std::printf(
      "   spool: %.1f MB, %.0f bytes a line, written by the agent's SpoolWriter in %.1f s\n",
      double(spool_bytes) / 1e6, double(spool_bytes) / double(n + 1), seconds(writing));

  double decoding = 0;
  const auto rows = decode_spool(flotilla::agent::RunDirectory(home, kRun).spool(), decoding);
  std::printf("1. decode: %.2f s, %.0f records/s (64 KiB reads, lines, protocol::decode, rows)\n",
              decoding, double(rows.size()) / decoding);
  store_only(dir, rows);
  writer_parts(dir, rows);
  insert_through_qtsql(dir, rows);
  end_to_end(dir, n);
  fs::remove_all(dir);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    int64_t n = 0;
    const std::string_view arg(argv[i]);
    auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), n);
    if (ec != std::errc() || end != arg.data() + arg.size() || n <= 0) {
      std::fprintf(stderr, "ingest_bench: \"%s\" is not a record count (a positive integer)\n",
                   argv[i]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {100000, 1000000};
  std::printf(
      "Ingest: step records from a node's agent to rows committed in SQLite (goal >= 200,000/s)\n"
      "machine: %u hardware threads\n\n",
      std::thread::hardware_concurrency());
  for (const int64_t n : sizes) bench(n);
  return 0;
}
