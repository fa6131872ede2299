#include "event_loop.h"

#include <algorithm>

namespace flotilla::controller {

EventLoop::EventLoop(std::function<void(const std::string&)> report, size_t link_queue_limit)
    : report_(std::move(report)), link_queue_limit_(link_queue_limit), thread_([this] { run(); }) {}

EventLoop::~EventLoop() {
  stop();
}

void EventLoop::post(Task task) {
  try_post(std::move(task));
}

void EventLoop::post_from_link(Task task, size_t messages) {
  try_post(std::move(task), std::max<size_t>(messages, 1));
}

bool EventLoop::try_post(Task task, size_t messages) {
  std::unique_lock lock(mutex_);
  if (messages > 0 && !stopping_ && link_messages_ >= link_queue_limit_) {
    ++posters_waiting_;
    room_changed_.wait(lock, [&] { return stopping_ || link_messages_ < link_queue_limit_; });
    --posters_waiting_;
  }
  if (stopping_) return false;
  // The loop sleeps only on an empty queue: a wake-up a batch, not a task.
  const bool was_empty = tasks_.empty();
  tasks_.emplace_back(std::move(task), messages);
  link_messages_ += messages;
  if (was_empty) wake_.notify_one();
  return true;
}

size_t EventLoop::link_messages() const {
  std::lock_guard lock(mutex_);
  return link_messages_;
}

size_t EventLoop::posters_waiting() const {
  std::lock_guard lock(mutex_);
  return posters_waiting_;
}

void EventLoop::post_after(std::chrono::milliseconds delay, Task task) {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  timers_.emplace(Clock::now() + delay, std::move(task));
  wake_.notify_one();
}

void EventLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_one();
  room_changed_.notify_all();
  if (thread_.joinable() && !on_loop_thread()) thread_.join();
}

void EventLoop::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // Timers that are due join the queue's end, behind what was posted.
    const auto now = Clock::now();
    while (!stopping_ && !timers_.empty() && timers_.begin()->first <= now) {
      tasks_.emplace_back(std::move(timers_.begin()->second), 0);
      timers_.erase(timers_.begin());
    }
    if (tasks_.empty()) {
      if (stopping_) return;
      if (timers_.empty())
        wake_.wait(lock);
      else
        wake_.wait_until(lock, timers_.begin()->first);
      continue;
    }
    // The whole queue at once: one lock a batch, not one a message.
    auto batch = std::move(tasks_);
    tasks_.clear();
    lock.unlock();
    size_t from_links = 0;
    for (auto& [task, messages] : batch) {
      from_links += messages;
      try {
        task();
      } catch (const std::exception& e) {
        // A task's own failure; the loop and the other tasks go on.
        if (report_) report_(e.what());
      }
    }
    batch.clear();  // what the tasks held goes here, outside the lock
    lock.lock();
    // Room for the readers once their messages are handled, not merely taken.
    link_messages_ -= from_links;
    if (from_links > 0) room_changed_.notify_all();
  }
}

}  // namespace flotilla::controller
