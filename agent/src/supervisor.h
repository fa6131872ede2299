#pragma once
// The per-run supervisor: a detached process that starts the node's ranks,
// spools their records, samples system metrics, and ends the run: finished
// when every rank exits cleanly, failed/oom when one does not (the others are
// then stopped, so none hangs in a collective), killed when asked to stop.

#include <filesystem>

namespace flotilla::agent {

struct SupervisorOptions {
  std::filesystem::path home;
  std::string run;
  std::filesystem::path train_binary;
  double sample_interval_s = 1.0;
  // One part of a SLURM run (slurm_job.h), started by srun on an allocated
  // node: the run is node-$SLURM_NODEID under `home`, and the rendezvous is
  // on the node srun was launched from, on a port from the job id.
  bool slurm_part = false;
};

// Runs until the run has ended and no process of it is left; returns the exit code.
int run_supervisor(const SupervisorOptions& options);

}  // namespace flotilla::agent
