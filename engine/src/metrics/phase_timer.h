#pragma once
// Times the phases of a training step on the rank's own clock. On the CPU that
// is a steady clock read at each boundary. On a GPU it is CUDA events, read a
// step late so that measuring never waits for the device.

#include <array>
#include <chrono>
#include <memory>
#include <optional>

namespace flotilla {

// Milliseconds from `start` to now on the steady clock.
inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

enum class Phase { data, forward, backward, comm, optimizer, count };

struct PhaseTimes {
  std::array<double, static_cast<size_t>(Phase::count)> ms{};
  double step_ms = 0;
  double& operator[](Phase p) { return ms[static_cast<size_t>(p)]; }
  double operator[](Phase p) const { return ms[static_cast<size_t>(p)]; }
};

class PhaseTimer {
 public:
  virtual ~PhaseTimer() = default;
  virtual void begin_step() = 0;
  // Ends `phase`; the next phase starts here. Phases may be skipped or repeated
  // (a pipeline alternates forward and comm), their times add up.
  virtual void end_phase(Phase phase) = 0;
  virtual void end_step() = 0;
  // The times of the step before the one just ended, if any (one step late).
  virtual std::optional<PhaseTimes> take_previous() = 0;
  // The times of the step just ended, waiting for the device if needed.
  virtual std::optional<PhaseTimes> take_last() = 0;
};

class SteadyClockTimer final : public PhaseTimer {
 public:
  void begin_step() override;
  void end_phase(Phase phase) override;
  void end_step() override;
  std::optional<PhaseTimes> take_previous() override;
  std::optional<PhaseTimes> take_last() override;

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point step_start_, phase_start_;
  PhaseTimes current_;
  std::optional<PhaseTimes> previous_, last_;
};

// CUDA events where this LibTorch has CUDA and `cuda` is true, else the steady clock.
std::unique_ptr<PhaseTimer> make_phase_timer(bool cuda);

}  // namespace flotilla
