// The controller's database under faults during a live local run of the
// `flotilla` CLI: another process holding SQLite's write lock, and the file
// system of the database filling up. The run trains on, the CLI says once
// what is wrong and once that it is over, and every record the agent spooled
// is stored exactly once in the end. The figures (time to detect, time to
// recover) are printed, not asserted.
#include <csignal>
#include <cstdio>

#include "cli_fixture.h"
#include "small_disk.h"
#include "sqlite_lock_holder.h"

namespace flotilla::testing {
namespace {

using controller::RunState;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Polls `done` (a file, a process's output) until it holds; false after `limit`.
bool wait_until(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

size_t occurrences(const std::string& text, const std::string& words) {
  size_t count = 0;
  for (auto at = text.find(words); at != std::string::npos; at = text.find(words, at + 1)) ++count;
  return count;
}

// What the CLI said of the database, for the test's log.
void print_problems(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("flotilla: database", 0) == 0) std::cout << "  CLI: " << line << "\n";
}

size_t lines_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// Kills `run` through a second CLI and checks what is left: the run killed,
// no rank alive, every spooled record stored once.
void kill_and_expect_complete(const Flotilla& f, ChildProcess& runner, const std::string& run) {
  const auto [status, output] = f.run({"kill", run, "--grace", "3"}, 60s);
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(runner.wait(60s), 4) << runner.output();
  EXPECT_EQ(f.store().run(run)->state, RunState::killed);
  EXPECT_TRUE(ranks_alive(run).empty());
  expect_complete(f, run);
}

TEST(DatabaseFaults, AnotherProcessHoldingTheWriteLockFor30sDelaysRecordsButLosesNone) {
  Flotilla f;
  auto [runner, run] = f.run_in_background(two_ranks("held", "epochs: 50\n"), 10);
  ASSERT_FALSE(run.empty());

  const auto locked_at = Clock::now();
  SqliteLockHolder holder(f.db(), f.dir().path() / "sqlite3.txt");
  ASSERT_TRUE(wait_until([&] { return holder.holds(); }, 30s)) << holder.output();
  EXPECT_EQ(holder.output().find("Error"), std::string::npos) << holder.output();
  const size_t stored_while_held = f.store().records(run).size();
  const size_t spooled_at_lock = lines_in(f.spool(run));
  ASSERT_TRUE(
      wait_until([&] { return runner->output().find("refuses writes") != std::string::npos; }, 30s))
      << runner->output();
  const double detected_s = seconds_since(locked_at);

  // The fault lasts 30 s: the run trains on and spools, and nothing is stored.
  const auto until_release = locked_at + 30s;
  while (Clock::now() < until_release) {
    ASSERT_FALSE(runner->wait(100ms)) << "the run ended while the lock was held:\n"
                                      << runner->output();
  }
  EXPECT_EQ(ranks_alive(run).size(), 2u);
  const size_t spooled_at_release = lines_in(f.spool(run));
  EXPECT_GT(spooled_at_release, spooled_at_lock + 20) << "the ranks did not train on";
  EXPECT_EQ(f.store().records(run).size(), stored_while_held);

  const auto released_at = Clock::now();
  holder.commit();
  ASSERT_TRUE(wait_until(
      [&] { return runner->output().find("takes writes again") != std::string::npos; }, 60s))
      << runner->output();
  const double recovered_s = seconds_since(released_at);
  // What was spooled during the lock reaches the database (some of it was
  // still on its way from the agent when the queue was stored).
  ASSERT_TRUE(wait_until([&] { return f.store().records(run).size() >= spooled_at_release; }, 60s))
      << f.store().records(run).size() << " stored of " << spooled_at_release << " spooled";
  const double caught_up_s = seconds_since(released_at);

  kill_and_expect_complete(f, *runner, run);
  const auto said = runner->output();
  EXPECT_EQ(occurrences(said, "refuses writes"), 1u) << said;
  EXPECT_EQ(occurrences(said, "takes writes again"), 1u) << said;
  EXPECT_NE(said.find("database is locked"), std::string::npos) << said;
  std::cout << "every record spooled during the lock stored " << caught_up_s
            << " s after its release\n";
  EXPECT_NE(said.find(f.db()), std::string::npos) << said;
  std::cout << "held write lock: detected after " << detected_s << " s, stored again "
            << recovered_s << " s after the lock was released; " << f.store().records(run).size()
            << " records stored, " << lines_in(f.spool(run)) << " spooled\n";
  print_problems(said);
}

// The writer's memory is bounded (--store-queue-limit, here one record):
// while another process holds the write lock, records past the limit are let
// go of, and once the lock is released the controller asks the agent for
// them again from its spool. Every spooled record is stored once.
TEST(DatabaseFaults, PastTheQueueLimitRecordsAreFetchedAgainFromTheSpoolAndNoneIsLost) {
  Flotilla f;
  const auto file = f.dir().write("limited.yaml", two_ranks("limited", "epochs: 50\n"));
  auto runner = f.start({"--store-queue-limit", "1", "run", file.string()}, "run.txt");
  const auto run = f.wait_for_run_with_records(10, 120s);
  ASSERT_FALSE(run.empty()) << runner->output();

  SqliteLockHolder holder(f.db(), f.dir().path() / "sqlite3.txt");
  ASSERT_TRUE(wait_until([&] { return holder.holds(); }, 30s)) << holder.output();
  ASSERT_TRUE(
      wait_until([&] { return runner->output().find("refuses writes") != std::string::npos; }, 30s))
      << runner->output();
  const size_t spooled_at_refusal = lines_in(f.spool(run));
  // The run trains on and spools well past the limit meanwhile.
  ASSERT_TRUE(wait_until([&] { return lines_in(f.spool(run)) > spooled_at_refusal + 40; }, 60s));
  holder.commit();
  ASSERT_TRUE(wait_until(
      [&] { return runner->output().find("takes writes again") != std::string::npos; }, 60s))
      << runner->output();
  const size_t spooled_at_release = lines_in(f.spool(run));
  ASSERT_TRUE(wait_until([&] { return f.store().records(run).size() >= spooled_at_release; }, 60s))
      << f.store().records(run).size() << " stored of " << spooled_at_release << " spooled";

  kill_and_expect_complete(f, *runner, run);
  const auto said = runner->output();
  EXPECT_NE(said.find("let go of past the queue's limit are fetched again"), std::string::npos)
      << said;
  print_problems(said);
}

TEST(DatabaseFaults, ARunTrainsOnWhileTheDatabasesDiskIsFullAndStoresEveryRecordOnceAfter) {
  if (!SmallDisk::can_mount()) GTEST_SKIP() << "mounting a small file system to fill needs root";
  Flotilla f("disk/flotilla.db");
  SmallDisk disk(f.dir().path() / "disk", "16m");
  auto [runner, run] = f.run_in_background(two_ranks("full", "epochs: 50\n"), 10);
  ASSERT_FALSE(run.empty());

  const auto filled_at = Clock::now();
  disk.fill();
  ASSERT_TRUE(
      wait_until([&] { return runner->output().find("refuses writes") != std::string::npos; }, 60s))
      << runner->output();
  const double detected_s = seconds_since(filled_at);
  // Full for as long as the ranks take to spool 100 more records.
  const size_t spooled_when_refused = lines_in(f.spool(run));
  ASSERT_TRUE(
      wait_until([&] { return lines_in(f.spool(run)) >= spooled_when_refused + 100; }, 120s))
      << "the ranks did not train on while the database's disk was full";
  EXPECT_EQ(ranks_alive(run).size(), 2u);
  EXPECT_FALSE(runner->wait(0ms)) << runner->output();
  const size_t spooled_at_free = lines_in(f.spool(run));

  const auto freed_at = Clock::now();
  disk.free();
  ASSERT_TRUE(wait_until(
      [&] { return runner->output().find("takes writes again") != std::string::npos; }, 60s))
      << runner->output();
  const double recovered_s = seconds_since(freed_at);
  EXPECT_GE(f.store().records(run).size(), spooled_at_free);

  kill_and_expect_complete(f, *runner, run);
  const auto said = runner->output();
  EXPECT_EQ(occurrences(said, "refuses writes"), 1u) << said;
  EXPECT_EQ(occurrences(said, "takes writes again"), 1u) << said;
  EXPECT_NE(said.find("full"), std::string::npos) << said;
  std::cout << "database disk full: detected after " << detected_s << " s, stored again "
            << recovered_s << " s after space was freed; " << f.store().records(run).size()
            << " records stored, " << lines_in(f.spool(run)) << " spooled\n";
  print_problems(said);
}

// The same fault, but the CLI does not live to see the space freed (it is
// killed, as a crash or a closed terminal would end it): what its writer
// held is in the agent's spool, and `flotilla attach` stores every record
// the database is missing once there is room, each once.
TEST(DatabaseFaults, AttachStoresEveryRecordMissedWhileTheDiskWasFullAfterTheCliEnded) {
  if (!SmallDisk::can_mount()) GTEST_SKIP() << "mounting a small file system to fill needs root";
  Flotilla f("disk/flotilla.db");
  SmallDisk disk(f.dir().path() / "disk", "16m");
  auto [runner, run] = f.run_in_background(two_ranks("full-attach", "epochs: 50\n"), 10);
  ASSERT_FALSE(run.empty());

  disk.fill();
  ASSERT_TRUE(
      wait_until([&] { return runner->output().find("refuses writes") != std::string::npos; }, 60s))
      << runner->output();
  runner->kill(SIGKILL);
  ASSERT_TRUE(runner->wait(10s));
  // Without a controller the run trains on and spools.
  const size_t spooled_at_end_of_cli = lines_in(f.spool(run));
  ASSERT_TRUE(
      wait_until([&] { return lines_in(f.spool(run)) >= spooled_at_end_of_cli + 50; }, 120s))
      << "the ranks did not train on after the CLI ended";
  EXPECT_EQ(ranks_alive(run).size(), 2u);

  disk.free();
  const size_t stored_before_attach = f.store().records(run).size();
  const size_t spooled_at_attach = lines_in(f.spool(run));
  EXPECT_LT(stored_before_attach, spooled_at_attach);
  const auto attached_at = Clock::now();
  auto attach = f.start({"attach", run}, "attach.txt");
  ASSERT_TRUE(wait_until([&] { return f.store().records(run).size() >= spooled_at_attach; }, 120s))
      << f.store().records(run).size() << " stored of " << spooled_at_attach << " spooled\n"
      << attach->output();
  const double caught_up_s = seconds_since(attached_at);

  const auto [status, output] = f.run({"kill", run, "--grace", "3"}, 60s);
  EXPECT_EQ(status, 0) << output;
  ASSERT_TRUE(attach->wait(60s)) << attach->output();
  EXPECT_EQ(f.store().run(run)->state, RunState::killed);
  EXPECT_TRUE(ranks_alive(run).empty());
  expect_complete(f, run);
  std::cout << "database disk full, CLI killed: `flotilla attach` stored the "
            << spooled_at_attach - stored_before_attach << " missing records " << caught_up_s
            << " s after it started; " << f.store().records(run).size() << " records stored, "
            << lines_in(f.spool(run)) << " spooled\n";
}

}  // namespace
}  // namespace flotilla::testing
