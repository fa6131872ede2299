// The controller's loop: one thread runs every task in the order posted,
// call() hands back results and exceptions, timers fire in due order, and a
// link that posts faster than the loop runs is held at the limit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "event_loop.h"
#include "flotilla/controller/controller.h"
#include "flotilla/protocol/messages.h"
#include "run_rows.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;

// Spins until `done` holds (30 s at most): waits for a state, not a time.
template <class Condition>
bool eventually(Condition done) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(EventLoop, RunsTasksFromManyThreadsOneAtATimeOnOneThread) {
  EventLoop loop(nullptr);
  std::set<std::thread::id> threads;  // touched by loop tasks only
  std::vector<int> order;
  int running = 0, most_at_once = 0;
  std::vector<std::thread> posters;
  for (int p = 0; p < 4; ++p)
    posters.emplace_back([&, p] {
      for (int i = 0; i < 1000; ++i)
        loop.post([&, p, i] {
          most_at_once = std::max(most_at_once, ++running);
          threads.insert(std::this_thread::get_id());
          if (p == 0) order.push_back(i);
          --running;
        });
    });
  for (auto& t : posters) t.join();
  const size_t seen = loop.call([&] { return order.size(); });
  EXPECT_EQ(seen, 1000u);
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(most_at_once, 1);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[i], i) << "one poster's tasks ran out of order";
}

TEST(EventLoop, CallReturnsTheResultOrRethrowsAndRunsInlineOnTheLoop) {
  EventLoop loop(nullptr);
  EXPECT_EQ(loop.call([] { return 42; }), 42);
  EXPECT_THROW(loop.call([]() -> int { throw std::invalid_argument("bad"); }),
               std::invalid_argument);
  // A task calling into the loop again would wait for itself; it runs at once.
  EXPECT_EQ(loop.call([&] { return loop.call([] { return 7; }) + 1; }), 8);
}

TEST(EventLoop, ATaskThatThrowsIsReportedAndTheNextStillRuns) {
  std::promise<std::string> reported;
  EventLoop loop([&](const std::string& what) { reported.set_value(what); });
  loop.post([] { throw std::runtime_error("task broke"); });
  EXPECT_TRUE(loop.call([] { return true; }));
  EXPECT_EQ(reported.get_future().get(), "task broke");
}

TEST(EventLoop, TimersFireByTheirDueTimeBehindWhatWasPosted) {
  EventLoop loop(nullptr);
  std::vector<std::string> fired;
  std::promise<void> release, last;
  auto released = release.get_future().share();
  loop.post([released] { released.wait(); });  // all three wait behind it
  loop.post_after(50ms, [&] {
    fired.push_back("later");
    last.set_value();
  });
  loop.post_after(0ms, [&] { fired.push_back("sooner"); });
  loop.post([&] { fired.push_back("posted"); });
  release.set_value();
  last.get_future().get();
  loop.call([&] { EXPECT_EQ(fired, (std::vector<std::string>{"posted", "sooner", "later"})); });
}

TEST(EventLoop, ALinkPostingFasterThanTheLoopRunsWaitsAtTheLimit) {
  constexpr size_t kLimit = 10;
  constexpr int kBurst = 1000;
  EventLoop loop(nullptr, kLimit);
  // The loop is held (as by a database write waiting out a lock).
  std::promise<void> release;
  auto released = release.get_future().share();
  loop.post([released] { released.wait(); });
  std::atomic<int> returned{0};
  std::vector<int> ran;
  std::thread link([&] {
    for (int i = 0; i < kBurst; ++i) {
      loop.post_from_link([&ran, i] { ran.push_back(i); });
      ++returned;
    }
  });
  ASSERT_TRUE(eventually([&] { return loop.posters_waiting() == 1 || returned == kBurst; }));
  EXPECT_EQ(loop.posters_waiting(), 1u) << "the whole burst was queued in memory";
  EXPECT_EQ(loop.link_messages(), kLimit);
  EXPECT_EQ(returned.load(), static_cast<int>(kLimit));
  release.set_value();
  link.join();
  const auto all = loop.call([&] { return ran; });
  ASSERT_EQ(all.size(), static_cast<size_t>(kBurst)) << "a held message was lost";
  for (int i = 0; i < kBurst; ++i) ASSERT_EQ(all[i], i);
}

TEST(EventLoop, StoppingRunsWhatWasPostedAndLetsAWaitingLinkGo) {
  auto loop = std::make_unique<EventLoop>(nullptr, 1);
  std::promise<void> release;
  auto released = release.get_future().share();
  loop->post([released] { released.wait(); });
  std::atomic<int> ran{0};
  loop->post_from_link([&] { ++ran; });
  std::thread link([&] { loop->post_from_link([&] { ++ran; }); });  // waits for room
  ASSERT_TRUE(eventually([&] { return loop->posters_waiting() == 1; }));
  std::thread stopper([&] { loop->stop(); });
  release.set_value();
  stopper.join();
  link.join();
  // The one queued before the stop ran; the waiting one was let go (run if
  // room came before the stop, refused after it), not left waiting.
  EXPECT_GE(ran.load(), 1);
  EXPECT_THROW(loop->call([] { return 0; }), std::runtime_error);
}

// Which threads the controller told of records and states.
class ThreadsTold : public ControllerObserver {
 public:
  void record_received(const std::string&, const RecordRow&) override { note(records_); }
  void state_changed(const std::string&, RunState, const std::string&) override { note(states_); }
  std::set<std::thread::id> threads() {
    std::lock_guard lock(mutex_);
    return threads_;
  }
  int records() {
    std::lock_guard lock(mutex_);
    return records_;
  }
  int states() {
    std::lock_guard lock(mutex_);
    return states_;
  }

 private:
  void note(int& count) {
    std::lock_guard lock(mutex_);
    threads_.insert(std::this_thread::get_id());
    ++count;
  }
  std::mutex mutex_;
  std::set<std::thread::id> threads_;
  int records_ = 0;
  int states_ = 0;
};

TEST(ControllerLoop, RecordsAndTheEndOfARunAreHandledOnOneThreadThatIsNotTheCallers) {
  testing::TempDir dir;
  // An agent that greets, takes the attach's resume, streams 500 records of
  // the run and its end, then waits for the controller to close.
  dir.write("hello", protocol::encode(protocol::Hello{"agent", "test agent", {"resume"}}) + "\n");
  std::string stream;
  for (int seq = 1; seq <= 500; ++seq)
    stream += protocol::encode(protocol::Record{
                  "r1", seq, "local", 0, "{\"type\":\"step\",\"step\":" + std::to_string(seq) + "}",
                  "step"}) +
              "\n";
  stream += protocol::encode(protocol::RunEnd{"r1", 501, "finished", ""}) + "\n";
  dir.write("stream", stream);
  const auto agent =
      dir.write("agent.sh", "#!/bin/sh\nread hello\ncat \"" + (dir.path() / "hello").string() +
                                "\"\nread resume\ncat \"" + (dir.path() / "stream").string() +
                                "\"\nread never\n");
  std::filesystem::permissions(agent, std::filesystem::perms::owner_all);
  Store store(QString::fromStdString((dir.path() / "flotilla.db").string()));
  testing::store_running_run(store, "r1");

  ControllerOptions options;
  options.agent_binary = agent;
  ThreadsTold told;
  Controller controller(store, options);
  controller.set_observer(&told);
  controller.attach("r1");
  ASSERT_TRUE(controller.wait_for_end("r1", 60s));
  EXPECT_EQ(told.records(), 501) << "500 records and the run_end record";
  EXPECT_EQ(told.states(), 1) << "the end";
  const auto threads = told.threads();
  ASSERT_EQ(threads.size(), 1u) << "records and states were handled on more than one thread";
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(store.run("r1")->state, RunState::finished);
  EXPECT_EQ(store.last_seq("r1", "local"), 501);
}

TEST(ControllerLoop, AStateChangeACallerAsksForIsToldOnTheLoopNotTheCallersThread) {
  // Before the loop, a public call moved the run on the caller's thread and
  // told the observer there, beside the links' threads.
  testing::TempDir dir;
  Store store(QString::fromStdString((dir.path() / "flotilla.db").string()));
  store.create_run(testing::minimal_run("never-started"));
  ControllerOptions options;
  options.agent_binary = "/nonexistent/flotilla-agent";  // nothing is started
  ThreadsTold told;
  Controller controller(store, options);
  controller.set_observer(&told);
  ASSERT_TRUE(controller.kill_run("never-started"));
  EXPECT_EQ(told.states(), 1);
  const auto threads = told.threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(store.run("never-started")->state, RunState::killed);
}

}  // namespace
}  // namespace flotilla::controller
