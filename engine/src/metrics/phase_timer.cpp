#include "phase_timer.h"

#include "torch_adapter.h"

namespace flotilla {
namespace {
double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

void SteadyClockTimer::begin_step() {
  current_ = {};
  step_start_ = phase_start_ = Clock::now();
}

void SteadyClockTimer::end_phase(Phase phase) {
  const auto now = Clock::now();
  current_[phase] += ms_between(phase_start_, now);
  phase_start_ = now;
}

void SteadyClockTimer::end_step() {
  current_.step_ms = ms_between(step_start_, Clock::now());
  previous_ = last_;
  last_ = current_;
}

std::optional<PhaseTimes> SteadyClockTimer::take_previous() {
  return std::exchange(previous_, std::nullopt);
}

std::optional<PhaseTimes> SteadyClockTimer::take_last() {
  previous_.reset();
  return std::exchange(last_, std::nullopt);
}

std::unique_ptr<PhaseTimer> make_phase_timer(bool cuda) {
  if (cuda) {
    if (auto timer = make_cuda_event_timer()) return timer;
  }
  return std::make_unique<SteadyClockTimer>();
}

}  // namespace flotilla
