#pragma once
// Keeps the event loop going (the window must stay live) until `done`, or
// `limit` has passed: false then.
#include <QTest>
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

}  // namespace flotilla::gui
