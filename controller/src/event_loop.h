#pragma once
// The controller's one thread of truth: tasks posted from any thread run
// here one at a time, in the order posted, and timers fire here. State that
// only loop tasks touch needs no lock; a task never waits for I/O that could
// take seconds (connecting, probing a port): that runs on the background
// pool and posts its outcome back.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace flotilla::controller {

class EventLoop {
 public:
  using Task = std::function<void()>;
  using Clock = std::chrono::steady_clock;

  // `report`: told what a task threw (the loop goes on with the next).
  // `link_queue_limit`: how many messages posted by post_from_link may be
  // queued or running at once before the posting thread waits for room.
  explicit EventLoop(std::function<void(const std::string&)> report,
                     size_t link_queue_limit = 16384);
  ~EventLoop();  // stop()
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs `task` on the loop after every task posted before it. Dropped once
  // the loop has stopped.
  void post(Task task);
  // As post, for a link's reader thread, with the number of messages the
  // task handles: while `link_queue_limit` messages wait, it waits for
  // room. The agent's stream then backs up into its spool, so a loop held
  // up (a database write waiting out a lock) holds a bounded number of
  // messages in memory, not a whole burst.
  void post_from_link(Task task, size_t messages = 1);
  // Runs `task` on the loop once `delay` has passed (after the tasks due then).
  void post_after(std::chrono::milliseconds delay, Task task);
  // Runs `work` on the loop and returns what it returns (or throws what it
  // throws); runs it at once when called on the loop. Throws
  // std::runtime_error when the loop has stopped.
  template <class Work>
  auto call(Work&& work) -> std::invoke_result_t<Work&> {
    using Result = std::invoke_result_t<Work&>;
    if (on_loop_thread()) return work();
    auto task = std::make_shared<std::packaged_task<Result()>>(std::forward<Work>(work));
    auto result = task->get_future();
    if (!try_post([task] { (*task)(); })) throw std::runtime_error("the controller is closing");
    return result.get();
  }
  // The messages post_from_link holds now, and how many link threads wait for room.
  size_t link_messages() const;
  size_t posters_waiting() const;
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Runs the tasks already posted (not the timers), then ends the thread.
  // Called from another thread than the loop's.
  void stop();

 private:
  bool try_post(Task task, size_t messages = 0);
  void run();

  const std::function<void(const std::string&)> report_;
  const size_t link_queue_limit_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;               // a task, a timer or the stop
  std::condition_variable room_changed_;       // post_from_link's wait
  std::deque<std::pair<Task, size_t>> tasks_;  // with the link messages it handles
  size_t link_messages_ = 0;
  size_t posters_waiting_ = 0;
  std::multimap<Clock::time_point, Task> timers_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flotilla::controller
