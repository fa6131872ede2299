#include "flotilla/controller/run_state.h"

#include <array>

namespace flotilla::controller {
namespace {
constexpr std::array<std::string_view, 8> kNames = {"created",  "starting", "queued", "running",
                                                    "finished", "failed",   "killed", "oom"};
}

std::string_view name_of(RunState state) {
  return kNames[static_cast<size_t>(state)];
}

std::optional<RunState> run_state_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<RunState>(i);
  return std::nullopt;
}

bool is_terminal(RunState state) {
  return state >= RunState::finished;
}

bool can_transition(RunState from, RunState to) {
  if (is_terminal(from)) return false;
  switch (to) {
    case RunState::created:
      return false;
    case RunState::starting:
      return from == RunState::created;
    case RunState::queued:  // again when SLURM's reason changes; from running when requeued
      return from == RunState::starting || from == RunState::queued || from == RunState::running;
    case RunState::running:
      return from == RunState::starting || from == RunState::queued;
    default:
      return true;  // any live state may end
  }
}

}  // namespace flotilla::controller
