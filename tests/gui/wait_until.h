#pragma once
// Keeps the event loop going (the window must stay live) until `done`, or
// `limit` has passed: false then.
#include <QCoreApplication>
#include <QTest>
#include <QTimer>
#include <chrono>
#include <functional>

namespace flotilla::gui {

inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    QTest::qWait(20);
  }
  return true;
}

// As wait_until, but `done` is asked after every turn of the event loop
// (one pass over the events posted so far), so that a state that lasts a
// single turn, such as a dashboard frame drawn half, is seen too. A timer
// wakes the loop when nothing else does.
inline bool wait_turn_by_turn(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  QTimer wake;
  wake.start(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
  }
  return true;
}

}  // namespace flotilla::gui
