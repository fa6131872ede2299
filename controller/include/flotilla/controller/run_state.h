#pragma once
// A run's life as an explicit state machine:
//   created -> starting -> running -> finished | failed | killed | oom
// A run may also end from created or starting (it never got going, or the
// controller only learns of the end on reattach).

#include <optional>
#include <string_view>

namespace flotilla::controller {

// queued: a SLURM job waiting for its nodes (its reason with it), between
// starting and running, and again when SLURM requeues it.
enum class RunState { created, starting, queued, running, finished, failed, killed, oom };

std::string_view name_of(RunState state);
std::optional<RunState> run_state_from_name(std::string_view name);
bool is_terminal(RunState state);
bool can_transition(RunState from, RunState to);

}  // namespace flotilla::controller
