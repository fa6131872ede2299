// A long-lived controller (the window's) whose node keeps dropping its link:
// each reconnect runs in the background, and neither its threads nor the
// closed links pile up.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "flotilla/controller/controller.h"
#include "flotilla/protocol/messages.h"
#include "run_rows.h"
#include "temp_dir.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;

size_t entries_in(const std::filesystem::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

// Counts the reconnects the controller reports.
class Reconnects : public ControllerObserver {
 public:
  void problem(const std::string& message) override {
    if (message.find("reconnected") == std::string::npos) return;
    std::lock_guard lock(mutex_);
    ++count_;
    changed_.notify_all();
  }
  bool wait_for(int n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 120s, [&] { return count_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int count_ = 0;
};

TEST(ControllerReconnects, TwoHundredReconnectsLeaveNoThreadsOrClosedLinksBehind) {
  testing::TempDir dir;
  // An agent that greets, takes the controller's one request (the resume)
  // and exits: every link it makes closes at once, and the controller
  // reconnects to follow the live run.
  const auto hello = protocol::encode(protocol::Hello{"agent", "test agent", {"resume"}});
  const auto agent = dir.write(
      "agent.sh", "#!/bin/sh\nread hello\ncat <<'EOF'\n" + hello + "\nEOF\nread resume\nexit 0\n");
  std::filesystem::permissions(agent, std::filesystem::perms::owner_all);
  Store store(QString::fromStdString((dir.path() / "flotilla.db").string()));
  testing::store_running_run(store, "r1");

  ControllerOptions options;
  options.agent_binary = agent;
  options.retry_interval = 1ms;
  Reconnects reconnects;
  Controller controller(store, options);
  controller.set_observer(&reconnects);
  controller.attach("r1");
  ASSERT_TRUE(reconnects.wait_for(20)) << "fewer than 20 reconnects within 120 s";
  const size_t threads_after_20 = entries_in("/proc/self/task");
  const size_t fds_after_20 = entries_in("/proc/self/fd");
  ASSERT_TRUE(reconnects.wait_for(200)) << "fewer than 200 reconnects within 120 s";
  const size_t threads_after_200 = entries_in("/proc/self/task");
  const size_t fds_after_200 = entries_in("/proc/self/fd");
  // A few in flight at either moment (the current link's reader, the
  // reconnect under way, one closing), never one per reconnect.
  EXPECT_LE(threads_after_200, threads_after_20 + 8)
      << threads_after_20 << " threads after 20 reconnects";
  EXPECT_LE(fds_after_200, fds_after_20 + 8) << fds_after_20 << " descriptors after 20 reconnects";
}

}  // namespace
}  // namespace flotilla::controller
