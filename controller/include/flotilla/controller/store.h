#pragma once
// The controller's SQLite database: experiments, runs, nodes and records.
//
// Reads may come from any thread: each thread that reads has one read-only
// connection of its own, opened at its first read and kept until the thread
// ends or the store goes (SQLite in WAL mode lets them run beside the
// writer; QtSql's connections belong to the thread that opened them). Every write goes through one
// writer thread, in the order it was queued; the writer commits whatever has
// queued up since its last commit as one transaction, so a burst of records
// costs one fsync, not one each. A record is stored once: (run, node, seq) is
// the primary key (seq counts per run on each node's agent; with the one
// `local` node that is the pair (run, seq)), and a record seen again after a
// reattach is ignored.
//
// Each queued write is all or nothing: a write of several statements runs in
// a savepoint of its own inside the batch's transaction and is rolled back
// alone when it fails (a record is one INSERT, which SQLite applies whole or
// not at all). When the database refuses writes as a whole (another
// connection holds its lock past the busy timeout, the file is read-only, the
// disk is full), nothing of the batch is stored: every item goes back to the
// front of the queue, in order, and is tried again until the database takes
// it; the problem listeners hear of the refusal and of its end. Records are
// never given up while the store lives; a write that a caller waits for gives
// up after `write_patience`, and the caller gets the error.
//
// Memory is bounded: the records the writer holds (queued, or in the batch
// being tried) are at most StoreOptions::queue_limit_records and
// queue_limit_bytes. Past the limit, while the database takes writes,
// append_record waits for room (the link's reader, and so the agent, slow
// down). While the database refuses writes, a record past the limit is
// dropped from memory only, when a refetch listener is there to get it back:
// the agent's spool still holds it. From then on every record of that run
// and node is dropped until the writer has committed what was queued before;
// then the listeners are asked to fetch everything of the run and node after
// the last stored seq again (the controller sends the agent a Resume, as
// `flotilla attach` does), and records of it are taken again in seq order
// from there (a live record ahead of the resent ones is dropped too: it
// comes again). Nothing is lost, and each record is stored once.

#include <QString>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "flotilla/controller/run_state.h"

class QSqlDatabase;

namespace flotilla::controller {

class StepNumberReader;
struct StoreReaders;  // the threads' read connections (store.cpp)

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ExperimentRow {
  int64_t id = 0;
  std::string name;
  std::string config_json;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

struct RunRow {
  std::string id;
  std::optional<int64_t> experiment_id;
  std::string experiment_name;
  std::string config_json;
  std::vector<std::string> nodes;  // in rank order: the first node holds rank 0
  int64_t world_size = 1;
  RunState state = RunState::created;
  std::string reason;
  int64_t created_ms = 0;
  std::optional<int64_t> starting_ms, running_ms, ended_ms;
};

struct RecordRow {
  int64_t seq = 0;
  std::string node;
  int64_t rank = 0;  // -1: the agent's system metrics
  std::string type;  // start, step, epoch, end, system, run_end
  std::string body;  // the JSON object as the agent sent it
};

// How a node's runs start: a login over SSH whose agent starts the ranks
// itself, or a SLURM cluster's login node whose agent submits jobs.
enum class NodeKind { ssh, slurm };

inline const char* node_kind_name(NodeKind kind) {
  return kind == NodeKind::slurm ? "slurm" : "ssh";
}

struct NodeRow {
  std::string name;
  NodeKind kind = NodeKind::ssh;
  std::string host;
  int port = 22;
  std::string user;        // empty: the controller's user
  std::string key_file;    // empty: ssh-agent
  std::string remote_dir;  // where the bundle and runs live; empty: ~/.flotilla
  std::string tags;        // comma-separated
  std::string agent_path;  // flotilla-agent already installed there; empty: deploy the bundle
  std::string probe_json;  // the last probe's answer, empty before one
  std::optional<int64_t> probed_ms;
  // kind slurm: what jobs ask for unless a run says otherwise; "" lets SLURM choose.
  std::string slurm_partition;
  std::string slurm_account;
  // The LibTorch the node's own engine is built against (`--torch`); empty:
  // python3's torch, built only when the node's GPUs need it.
  std::string torch_prefix;
  // The engine built there by the last probe (engine_on_node.h); empty: the bundle's.
  std::string engine_json;
  bool is_local() const { return name == "local"; }
};

// Which records to read: unset fields match everything.
struct RecordFilter {
  std::optional<std::string> type;  // start, step, epoch, end, system, run_end, ...
  std::optional<int64_t> rank;      // -1: the agents' own records (system, run_end)
  std::optional<std::string> node;
};

// One field of the step records over one bucket of steps.
struct FieldSummary {
  double min = 0, max = 0, sum = 0;
  int64_t count = 0;  // records of the bucket that have the field as a number
};

// A run's step records summarised per rank over buckets of
// kStepsPerBucket steps (migration 0004), kept by the store's writer as
// records are stored: what a view paints first when a run is too long to
// read at once.
struct StepBucketRow {
  int64_t rank = 0;
  int64_t bucket = 0;                          // steps bucket x kStepsPerBucket + 1 ..
  int64_t records = 0;                         // step records in the bucket
  std::map<std::string, FieldSummary> fields;  // the fields some record of the bucket has
};
inline constexpr int64_t kStepsPerBucket = 256;

struct TransitionRow {
  RunState state;
  int64_t at_ms = 0;
  std::string reason;
};

int64_t now_ms();

enum class StoreAccess {
  read_write,  // creates and migrates the database; writes go through the writer thread
  read_only,   // for views: never creates, migrates or writes; every write throws
};

struct StoreOptions {
  // How long one statement waits for another connection's lock before the
  // batch counts as refused.
  std::chrono::milliseconds busy_timeout{10000};
  // The pause between tries while the database refuses writes.
  std::chrono::milliseconds retry_interval{1000};
  // How long a write that a caller waits for (a run created, a state stored)
  // is retried before the caller gets the error; records are retried for as
  // long as the store lives.
  std::chrono::milliseconds write_patience{30000};
  // The most the writer holds of records not yet committed (see the top of
  // this file): 100,000 records or 64 MiB of their text, whichever comes first.
  int64_t queue_limit_records = 100000;
  int64_t queue_limit_bytes = int64_t{64} << 20;
};

// What the writer holds of records not yet committed, and the most it has
// held; `dropped`: records it let go of past the limit, to be fetched again.
struct StoreQueueUse {
  int64_t records = 0, bytes = 0;
  int64_t peak_records = 0, peak_bytes = 0;
  int64_t dropped = 0;
};

// Records of `run` from `node` after `after_seq` are to be sent again: the
// store let some of them go past its queue's limit while the database
// refused writes, and it takes writes again.
struct RefetchRequest {
  std::string run, node;
  int64_t after_seq = 0;
};

// The database refused the queued writes, or takes them again.
struct StoreProblem {
  std::string message;            // names the database and what it said
  std::vector<std::string> runs;  // the runs whose records wait in the queue
  bool resolved = false;          // the database took every write that waited
};

class Store {
 public:
  // Opens (creating when missing) and migrates the database at `path`. Throws
  // StoreError naming the file and what went wrong. Read-only, the database
  // must exist at this Flotilla's schema version: an older one is refused
  // with how to migrate it, a newer one with the version it has.
  explicit Store(QString path, StoreOptions options = {},
                 StoreAccess access = StoreAccess::read_write);
  Store(QString path, StoreAccess access) : Store(std::move(path), StoreOptions{}, access) {}
  // Commits everything queued, then stops the writer. A database that still
  // refuses writes is given `write_patience`; what it never took is reported.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const QString& path() const { return path_; }
  int schema_version() const;
  // A number that changes whenever the database has changed since this
  // thread last asked (SQLite's PRAGMA data_version on this thread's read
  // connection, with the connection's serial: a reopened connection never
  // repeats a number). A view reads again only when it changed; compare
  // numbers read on one thread only.
  int64_t data_version() const;
  static int latest_schema_version();

  // Reads.
  std::vector<ExperimentRow> experiments() const;
  std::optional<ExperimentRow> experiment(const std::string& name) const;
  std::vector<RunRow> runs() const;
  std::optional<RunRow> run(const std::string& id) const;
  std::vector<RunRow> live_runs() const;  // created, starting or running
  // Every record of `run` after `after_seq`, ordered by node then seq.
  std::vector<RecordRow> records(const std::string& run, int64_t after_seq = 0) const;
  // The records of `run` that match `filter`, in the same order; indexed by
  // (run, type, rank), so a view reads what it draws and nothing else.
  std::vector<RecordRow> records(const std::string& run, const RecordFilter& filter,
                                 int64_t after_seq = 0) const;
  // At most `limit` records of `run` after the record (after_node,
  // after_seq), in the same order: a long run read a page at a time (from
  // ("", 0)), so that its records' texts are never all in memory at once.
  std::vector<RecordRow> records_page(const std::string& run, const std::string& after_node,
                                      int64_t after_seq, int64_t limit) const;
  // SQLite's plan for records(run, filter), one step a line: how a view's
  // read is served (tests check that it goes through the index).
  std::string records_query_plan(const std::string& run, const RecordFilter& filter) const;
  // The run's step buckets, by rank then bucket.
  std::vector<StepBucketRow> step_buckets(const std::string& run) const;
  int64_t last_seq(const std::string& run, const std::string& node) const;
  std::vector<TransitionRow> transitions(const std::string& run) const;
  std::vector<std::string> node_names() const;
  std::vector<NodeRow> nodes() const;
  std::optional<NodeRow> node(const std::string& name) const;
  // The live runs (created, starting, running) that use `node`.
  std::vector<std::string> live_runs_on(const std::string& node) const;

  // Writes, queued in order to the writer thread.
  // Inserts or replaces the experiment named `name`; returns its id.
  int64_t save_experiment(const std::string& name, const std::string& config_json);
  void create_run(const RunRow& run);  // waits until stored
  // Throws StoreError naming the node when one of that name exists.
  void add_node(const NodeRow& node);
  // Throws StoreError when there is no such node, or a live run uses it.
  void remove_node(const std::string& name);
  // Stores new connection fields (all but the name; the last probe is kept).
  // Throws StoreError when there is no such node, or a live run uses it.
  void update_node(const NodeRow& node);
  // The engine a probe built on the node (or "" for the bundle's).
  void save_engine(const std::string& name, const std::string& engine_json);
  void save_probe(const std::string& name, const std::string& probe_json);
  // Moves a run to `to` if the state machine allows it from the stored state,
  // atomically; returns whether it moved (a second end of one run does not).
  bool transition(const std::string& run, RunState to, const std::string& reason = {});
  // A new attempt of a run that ended failed, killed or oom: back to
  // `starting` (its end time cleared, the transition kept in its history);
  // returns false, moving nothing, from any other state.
  bool reopen(const std::string& run, const std::string& reason);
  // How many times the run was started: 1, and one more for each reopen.
  int64_t attempts(const std::string& run) const;
  // Queues the record; waits only for room in the queue while the database
  // takes writes. False: dropped from memory past the queue's limit while the
  // database refuses writes (or a resend is under way); a refetch listener is
  // asked for it again once the database takes writes.
  bool append_record(const std::string& run, RecordRow record);
  void flush();  // waits until everything queued so far is committed

  // For the controller's other tables (sweep_store.h, link_bench.h): `write` runs on the
  // writer thread in its turn, inside the transaction of its batch, and is
  // waited for (what it throws is rethrown here); `read` gets a read-only
  // connection of its own.
  void write_transaction(const std::function<void(QSqlDatabase&)>& write);
  void read_only(const std::function<void(QSqlDatabase&)>& read) const;
  // Transactions the writer has committed: a burst of records is one, not one each.
  int64_t commits() const { return commits_; }
  StoreQueueUse queue_use() const;

  // Told, on the writer thread, when the database refuses queued writes and
  // when it takes them again. Without a listener the problem goes to stderr.
  // A listener must not wait on this store (flush, a write): the writer is
  // the one calling it.
  using ProblemListener = std::function<void(const StoreProblem&)>;
  int add_problem_listener(ProblemListener listener);  // returns an id for removing it
  void remove_problem_listener(int id);
  // Told, on the writer thread, which records to fetch again (see the top of
  // this file). Records past the queue's limit are dropped only while one is
  // there; without, append_record waits for room. The same rules as for
  // problem listeners apply.
  using RefetchListener = std::function<void(const RefetchRequest&)>;
  int add_refetch_listener(RefetchListener listener);
  void remove_refetch_listener(int id);

 private:
  // Moves a run to `to` when `allowed_from` its stored state, atomically with
  // its transition row; `times` sets the runs row's times (one ? for now).
  bool move_stored_run(const std::string& run, RunState to, const std::string& reason,
                       const std::function<bool(RunState)>& allowed_from, const QString& times);
  using Write = std::function<void(QSqlDatabase&)>;
  struct QueuedRecord {
    std::string run;
    RecordRow record;
  };
  struct Item {
    std::variant<QueuedRecord, Write> what;
    std::shared_ptr<std::promise<void>> done;  // set after the commit
    // When the database first refused it (the epoch: never): a waited-for
    // write is given up `write_patience` after.
    std::chrono::steady_clock::time_point refused_since{};
    int64_t bytes = 0;  // a record's share of the queue's limit; 0 for a write
  };
  // A run and node whose records the writer let go of past the queue's limit.
  struct Gap {
    // Asked for once everything queued before the first drop (records and
    // writes alike) is done: items_queued_ then; items_done_ counts up to it.
    int64_t ready_after_item = 0;
    bool refetch_asked = false;
    int64_t next_seq = 0;  // once asked: the next record taken, in seq order
  };
  // Runs `write` on the writer thread in order and waits for its commit;
  // rethrows what it threw.
  void write_and_wait(Write write);
  void writer_loop();
  // One try at `batch` in one transaction, the step buckets of its records
  // included; each item's own failure in `errors`. Returns why the database
  // refused the batch as a whole (then nothing of it is stored), empty once
  // committed.
  std::string commit(QSqlDatabase& db, const StepNumberReader& step_numbers,
                     std::deque<Item>& batch, std::vector<std::exception_ptr>& errors);
  template <typename F>
  auto with_reader(F&& read) const;
  // This thread's read connection and its serial, opened at its first read.
  std::pair<QSqlDatabase, int64_t> reader() const;
  // Closes this thread's read connection (after a failed read: the next
  // read opens afresh, in case the file was replaced).
  void drop_reader() const;

  // Read-only: refuses a missing database or one of another schema version.
  void check_schema_for_reading() const;
  // Throws unless the store may write.
  void check_writable() const;
  void report(const StoreProblem& problem);
  // After a commit: asks the refetch listeners for the gaps whose earlier
  // records are all stored.
  void ask_for_refetches(QSqlDatabase& db);
  bool has_room_locked(int64_t bytes) const;
  void release_locked(const Item& item);  // a record committed or given up

  QString path_;
  // This Store's claim on its file (claim_database_file): held until the
  // writer thread has ended.
  std::shared_ptr<void> file_claim_;
  StoreOptions options_;
  StoreAccess access_ = StoreAccess::read_write;
  QString writer_connection_;
  std::shared_ptr<StoreReaders> readers_;
  std::mutex listeners_mutex_;
  std::map<int, ProblemListener> listeners_;
  std::map<int, RefetchListener> refetch_listeners_;
  std::atomic<int> refetch_listener_count_{0};
  int next_listener_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable room_;  // records held went down, or the database refused
  std::deque<Item> queue_;
  bool stopping_ = false;
  // Guarded by mutex_: the limit's accounting and the gaps it made.
  StoreQueueUse use_;
  bool refused_ = false;  // the last try at a batch was refused
  int64_t items_queued_ = 0, items_done_ = 0;
  std::map<std::pair<std::string, std::string>, Gap> gaps_;  // (run, node)
  std::atomic<int64_t> commits_{0};
  std::string open_error_;
  std::promise<void> writer_ready_;
  std::thread writer_;
};

}  // namespace flotilla::controller
