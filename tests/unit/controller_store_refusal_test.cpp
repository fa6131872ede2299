// The store's writer when the database refuses writes: a held lock, a
// read-only file, a full disk. Nothing queued is lost or half-stored, the
// refusal is reported, and once the database takes writes again every record
// is stored exactly once.
#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "flotilla/controller/controller.h"
#include "flotilla/controller/store.h"
#include "run_rows.h"
#include "small_disk.h"
#include "sqlite_lock_holder.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;
using testing::minimal_run;
using testing::SmallDisk;
using testing::SqliteLockHolder;
using testing::TempDir;

// Quick to give up on a lock and quick to try again, so that a refusal shows
// within a test's time.
StoreOptions impatient() {
  StoreOptions options;
  options.busy_timeout = 100ms;
  options.retry_interval = 50ms;
  options.write_patience = 60s;
  return options;
}

RecordRow a_record(int64_t seq) {
  return {seq, "local", 0, "step", "{\"type\":\"step\",\"step\":" + std::to_string(seq) + "}"};
}

// What the store reported, for a test to wait on.
class Problems {
 public:
  explicit Problems(Store& store) : store_(store) {
    id_ = store.add_problem_listener([this](const StoreProblem& p) {
      std::lock_guard lock(mutex_);
      seen_.push_back(p);
      changed_.notify_all();
    });
  }
  ~Problems() { store_.remove_problem_listener(id_); }
  // Waits for a refusal (resolved = false) or its end (true); false after 30 s.
  bool wait_for(bool resolved) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 30s, [&] {
      for (const auto& p : seen_)
        if (p.resolved == resolved) return true;
      return false;
    });
  }
  StoreProblem first(bool resolved) {
    std::lock_guard lock(mutex_);
    for (const auto& p : seen_)
      if (p.resolved == resolved) return p;
    return {};
  }

 private:
  Store& store_;
  int id_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<StoreProblem> seen_;
};

// A plain connection of the test's own, beside the store's.
class Connection {
 public:
  explicit Connection(const std::filesystem::path& file)
      : name_(QString("test-%1").arg(reinterpret_cast<quintptr>(this))) {
    auto db = QSqlDatabase::addDatabase("QSQLITE", name_);
    db.setDatabaseName(QString::fromStdString(file.string()));
    EXPECT_TRUE(db.open()) << db.lastError().text().toStdString();
  }
  ~Connection() {
    QSqlDatabase::database(name_).close();
    QSqlDatabase::removeDatabase(name_);
  }
  void exec(const QString& sql) {
    QSqlQuery q(QSqlDatabase::database(name_));
    EXPECT_TRUE(q.exec(sql)) << sql.toStdString() << ": " << q.lastError().text().toStdString();
  }
  int64_t count(const QString& sql) {
    QSqlQuery q(QSqlDatabase::database(name_));
    EXPECT_TRUE(q.exec(sql)) << q.lastError().text().toStdString();
    return q.next() ? q.value(0).toLongLong() : -1;
  }

 private:
  QString name_;
};

QString q(const std::filesystem::path& p) {
  return QString::fromStdString(p.string());
}

// Every record 1..n of run r1 once, in order.
void expect_each_record_once(const Store& store, int64_t n) {
  const auto rows = store.records("r1");
  ASSERT_EQ(rows.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(rows[i].seq, i + 1);
}

TEST(StoreWrites, AWriteThatFailsHalfwayLeavesNothingOfItselfAndTheRestOfItsBatchIsStored) {
  TempDir dir;
  const auto file = dir.path() / "flotilla.db";
  Store store(q(file), impatient());
  store.create_run(minimal_run("r1"));
  // The database refuses the last statement of two writes: a run's first
  // transition (its rows before it went in) and a move to running (after the
  // state was updated).
  Connection test(file);
  test.exec(
      "CREATE TRIGGER refuse_half BEFORE INSERT ON run_transitions "
      "WHEN NEW.run_id = 'half' OR NEW.state = 'running' "
      "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
  store.append_record("r1", a_record(1));
  EXPECT_THROW(store.create_run(minimal_run("half")), StoreError);
  ASSERT_TRUE(store.transition("r1", RunState::starting));
  EXPECT_THROW(store.transition("r1", RunState::running), StoreError);
  store.append_record("r1", a_record(2));
  store.flush();
  EXPECT_FALSE(store.run("half"));
  EXPECT_EQ(test.count("SELECT COUNT(*) FROM run_nodes WHERE run_id = 'half'"), 0);
  EXPECT_EQ(store.run("r1")->state, RunState::starting);
  EXPECT_FALSE(store.run("r1")->running_ms);
  EXPECT_EQ(store.transitions("r1").size(), 2u);  // created, starting
  expect_each_record_once(store, 2);
}

TEST(StoreWrites, KeepsRecordsQueuedWhileAnotherConnectionHoldsTheLockAndStoresEachOnceAfter) {
  TempDir dir;
  const auto file = dir.path() / "flotilla.db";
  Store store(q(file), impatient());
  Problems problems(store);
  store.create_run(minimal_run("r1"));
  {
    Connection holder(file);
    holder.exec("BEGIN EXCLUSIVE");
    for (int64_t seq = 1; seq <= 100; ++seq) store.append_record("r1", a_record(seq));
    ASSERT_TRUE(problems.wait_for(false)) << "the refusal was never reported";
    // Records keep coming while the database refuses them, and some twice (a resume).
    for (int64_t seq = 51; seq <= 200; ++seq) store.append_record("r1", a_record(seq));
    holder.exec("COMMIT");
  }
  ASSERT_TRUE(problems.wait_for(true)) << "the end of the refusal was never reported";
  store.flush();
  expect_each_record_once(store, 200);
  const auto refusal = problems.first(false);
  EXPECT_NE(refusal.message.find(file.string()), std::string::npos) << refusal.message;
  EXPECT_NE(refusal.message.find("locked"), std::string::npos) << refusal.message;
  EXPECT_EQ(refusal.runs, std::vector<std::string>{"r1"});
}

// The window's case: its store's writer is refused by another program (a
// `sqlite3` shell in BEGIN EXCLUSIVE), and meanwhile it opens read-only
// stores of the same file in the same process (the dashboard's and the
// compare view's reads). A store that opened the file outside SQLite to look
// at its header dropped the process's POSIX locks on it; the shell, once
// done, took itself for the file's last user and deleted the write-ahead log
// under the window's connections, whose next read failed with "disk I/O
// error" (claim_database_file).
TEST(StoreWrites, ReadersInTheSameProcessReadWhileAnotherProgramHoldsTheLockAndAfter) {
  TempDir dir;
  const auto file = dir.path() / "flotilla.db";
  Store store(q(file), impatient());
  Problems problems(store);
  store.create_run(minimal_run("r1"));
  for (int64_t seq = 1; seq <= 10; ++seq) store.append_record("r1", a_record(seq));
  store.flush();
  {
    SqliteLockHolder holder(file.string(), dir.path() / "sqlite3.txt");
    for (int i = 0; i < 600 && !holder.holds(); ++i) std::this_thread::sleep_for(50ms);
    ASSERT_TRUE(holder.holds()) << holder.output();
    for (int64_t seq = 11; seq <= 20; ++seq) store.append_record("r1", a_record(seq));
    ASSERT_TRUE(problems.wait_for(false)) << "the refusal was never reported";
    Store reader(q(file), {}, StoreAccess::read_only);
    EXPECT_EQ(reader.records("r1").size(), 10u) << "read while the lock is held";
    holder.commit();
  }
  ASSERT_TRUE(problems.wait_for(true)) << "the end of the refusal was never reported";
  Store reader(q(file), {}, StoreAccess::read_only);
  EXPECT_EQ(reader.records("r1").size(), 20u) << "read after the lock is released";
  expect_each_record_once(store, 20);
}

TEST(StoreWrites, AWriteThatIsWaitedForGetsTheErrorAfterItsPatienceAndRecordsStayQueued) {
  TempDir dir;
  const auto file = dir.path() / "flotilla.db";
  auto options = impatient();
  options.write_patience = 500ms;
  Store store(q(file), options);
  Problems problems(store);
  store.create_run(minimal_run("r1"));
  {
    Connection holder(file);
    holder.exec("BEGIN EXCLUSIVE");
    store.append_record("r1", a_record(1));
    try {
      store.transition("r1", RunState::starting);
      ADD_FAILURE() << "a transition was stored while another connection held the lock";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    }
    store.append_record("r1", a_record(2));
    holder.exec("COMMIT");
  }
  store.flush();
  expect_each_record_once(store, 2);
  EXPECT_EQ(store.run("r1")->state, RunState::created);
}

// `dir` seen read-only at `view`: a read-only bind mount for root, whom file
// modes do not stop; file modes for anyone else.
class ReadOnlyView {
 public:
  ReadOnlyView(const std::filesystem::path& dir, const std::filesystem::path& view)
      : dir_(dir), view_(view) {
    if (::geteuid() == 0) {
      std::filesystem::create_directories(view);
      if (::mount(dir.c_str(), view.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
          ::mount(nullptr, view.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
        throw std::runtime_error("cannot make a read-only bind mount: " +
                                 std::string(std::strerror(errno)));
      mounted_ = true;
    } else {
      std::filesystem::create_symlink(dir, view);
      set_writable(false);
    }
  }
  ~ReadOnlyView() {
    if (mounted_) ::umount2(view_.c_str(), MNT_DETACH);
    set_writable(true);
  }
  void make_writable() {
    if (mounted_)
      ASSERT_EQ(::mount(nullptr, view_.c_str(), nullptr, MS_REMOUNT | MS_BIND, nullptr), 0)
          << std::strerror(errno);
    else
      set_writable(true);
  }

 private:
  void set_writable(bool writable) {
    using std::filesystem::perms;
    const auto mode = writable ? perms::owner_all : perms::owner_read | perms::owner_exec;
    std::filesystem::permissions(dir_, mode);
    for (const auto& entry : std::filesystem::directory_iterator(dir_))
      if (entry.path().extension() == ".db")
        std::filesystem::permissions(
            entry.path(), writable ? perms::owner_read | perms::owner_write : perms::owner_read);
  }
  std::filesystem::path dir_, view_;
  bool mounted_ = false;
};

TEST(StoreWrites, KeepsRecordsQueuedWhileTheFileIsReadOnlyAndStoresThemOnceItIsWritable) {
  TempDir dir;
  const auto data = dir.path() / "data";
  std::filesystem::create_directories(data);
  { Store(q(data / "flotilla.db")).create_run(minimal_run("r1")); }
  // Another process has the database open, as the window would: its WAL
  // files stay, and a read-only connection can read beside it.
  Connection other(data / "flotilla.db");
  other.exec("SELECT COUNT(*) FROM runs");
  ReadOnlyView view(data, dir.path() / "view");
  Store store(q(dir.path() / "view" / "flotilla.db"), impatient());
  Problems problems(store);
  ASSERT_TRUE(store.run("r1"));  // reading works
  for (int64_t seq = 1; seq <= 50; ++seq) store.append_record("r1", a_record(seq));
  ASSERT_TRUE(problems.wait_for(false)) << "the refusal was never reported";
  EXPECT_NE(problems.first(false).message.find("readonly"), std::string::npos)
      << problems.first(false).message;
  for (int64_t seq = 51; seq <= 100; ++seq) store.append_record("r1", a_record(seq));
  view.make_writable();
  ASSERT_TRUE(problems.wait_for(true)) << "the end of the refusal was never reported";
  store.flush();
  expect_each_record_once(store, 100);
}

TEST(StoreWrites, KeepsRecordsQueuedWhileTheDiskIsFullAndStoresThemOnceThereIsRoom) {
  if (!SmallDisk::can_mount()) GTEST_SKIP() << "mounting a small file system to fill needs root";
  TempDir dir;
  SmallDisk disk(dir.path() / "disk", "4m");
  Store store(q(dir.path() / "disk" / "flotilla.db"), impatient());
  Problems problems(store);
  store.create_run(minimal_run("r1"));
  disk.fill();
  const std::string body(2000, 'y');  // more than the few bytes the filler left
  for (int64_t seq = 1; seq <= 100; ++seq)
    store.append_record("r1", {seq, "local", 0, "step", "{\"pad\":\"" + body + "\"}"});
  ASSERT_TRUE(problems.wait_for(false)) << "the refusal was never reported";
  EXPECT_NE(problems.first(false).message.find("full"), std::string::npos)
      << problems.first(false).message;
  disk.free();
  ASSERT_TRUE(problems.wait_for(true)) << "the end of the refusal was never reported";
  store.flush();
  expect_each_record_once(store, 100);
}

// What the run's followers hear: the controller passes the store's refusal
// and its end to its observer (the CLI prints it, the window shows it).
class HeardProblems : public ControllerObserver {
 public:
  void problem(const std::string& message) override {
    std::lock_guard lock(mutex_);
    heard_.push_back(message);
    changed_.notify_all();
  }
  bool wait_for(const std::string& words) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 30s, [&] {
      for (const auto& m : heard_)
        if (m.find(words) != std::string::npos) return true;
      return false;
    });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> heard_;
};

TEST(StoreWrites, TheControllersObserverHearsOfTheRefusalAndOfItsEnd) {
  TempDir dir;
  const auto file = dir.path() / "flotilla.db";
  Store store(q(file), impatient());
  store.create_run(minimal_run("r1"));
  HeardProblems heard;
  Controller controller(store);
  controller.set_observer(&heard);
  {
    Connection holder(file);
    holder.exec("BEGIN EXCLUSIVE");
    for (int64_t seq = 1; seq <= 10; ++seq) store.append_record("r1", a_record(seq));
    EXPECT_TRUE(heard.wait_for("refuses writes")) << "the observer never heard of the refusal";
    holder.exec("COMMIT");
  }
  EXPECT_TRUE(heard.wait_for("takes writes again")) << "the observer never heard of its end";
  store.flush();
  expect_each_record_once(store, 10);
}

}  // namespace
}  // namespace flotilla::controller
