#pragma once
// The `flotilla` command's exit statuses, one list for every subcommand.

#include "flotilla/controller/run_state.h"

namespace flotilla::controller {

enum ExitStatus : int {
  kExitDone = 0,  // finished, or a command that did its job
  kExitFailed = 1,
  kExitBadInput = 2,  // every problem named, nothing stored
  kExitOom = 3,
  kExitKilled = 4,
};

// A run's end as the exit status of the command that followed it.
inline int exit_status_of(RunState state) {
  switch (state) {
    case RunState::finished:
      return kExitDone;
    case RunState::oom:
      return kExitOom;
    case RunState::killed:
      return kExitKilled;
    default:
      return kExitFailed;
  }
}

}  // namespace flotilla::controller
