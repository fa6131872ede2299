#pragma once
// The benches' timer: one untimed call first (it allocates what the work
// keeps: optimizer state, caches), then the best of `repeats` timed calls,
// the figure least disturbed by whatever else the machine was doing.

#include <algorithm>
#include <chrono>

namespace flotilla {

template <class Work>
double best_ms(int repeats, const Work& work) {
  work();
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(
        best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count());
  }
  return best;
}

}  // namespace flotilla
