#pragma once
// A run on a SLURM cluster, seen from its login node. The agent there starts
// this job supervisor (detached, as it starts a run's supervisor on an SSH
// node): it submits one job with sbatch, whose srun starts one
// `flotilla-agent supervise --slurm-part` on each allocated node with that
// node's ranks. The parts keep their spools under the run's folder, on the
// file system the cluster shares; this supervisor follows them into the
// run's one spool (numbered on with its own seq, so the stream, its resume
// and the controller see one node), says the job's queue state while it
// waits, and ends the run once the job and its parts have ended: with the
// parts' outcome, or with SLURM's reason when SLURM ended it (scancel from
// outside, the time limit, a node lost). SIGTERM cancels the job (scancel).

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/messages.h"

namespace flotilla::agent {

struct SlurmJobOptions {
  std::filesystem::path home;
  std::string run;
  std::filesystem::path agent_binary;  // the flotilla-agent each part runs
  std::filesystem::path train_binary;
};

// Runs until the job and its parts have ended; returns the exit code.
int run_slurm_job(const SlurmJobOptions& options);

// When the run in `run_folder` was submitted as a SLURM job: scancel it, and
// say so in words ("SLURM job 12 cancelled"); "" for a run that is not a job.
std::string cancel_slurm_job(const std::filesystem::path& run_folder);

// Where the parts of a run keep their files: <run folder>/parts holds each
// part's start (start-node-K.json, K = SLURM_NODEID), and each run of the
// job (restarts: 0, one more each requeue) is a supervisor's home,
// parts/job-ID-RESTARTS, with part K's run named node-K there.
std::filesystem::path slurm_parts_home(const std::filesystem::path& run_folder);
std::string slurm_part_run(int64_t node_id);
std::filesystem::path slurm_part_start_file(const std::filesystem::path& parts_home,
                                            int64_t node_id);
std::filesystem::path slurm_attempt_home(const std::filesystem::path& parts_home,
                                         const std::string& job_id, int64_t restarts);

// The start of part `node_id` of a SLURM run: its node's ranks; the
// rendezvous address is filled in by the part itself once the job runs.
protocol::StartRun slurm_part_start(const protocol::StartRun& run_start, int64_t nodes,
                                    int64_t node_id);

// A part's config: checkpoints in the run's folder (save.dir, when
// relative, is taken from there, not from the part's folder), so that a
// requeued job's parts, on other nodes, find them.
std::string with_run_folder_checkpoints(const std::string& config_json,
                                        const std::filesystem::path& run_folder);

// sbatch's arguments for the run (without the program): its nodes, one task
// each, GPUs, time, partition, account, the site's extra options, a job name
// and output file under `run_folder`; `--parsable` so that it prints the id;
// `--requeue` when the run saves checkpoints, else `--no-requeue`.
std::vector<std::string> sbatch_arguments(const ExperimentConfig& config, const std::string& run,
                                          const std::filesystem::path& run_folder);

// The batch script: srun, one supervisor per allocated node.
std::string slurm_batch_script(const std::filesystem::path& agent_binary,
                               const std::filesystem::path& parts_home,
                               const std::filesystem::path& train_binary);

// `scontrol show job -o ID`'s one line as fields (JobState, Reason, NodeList, ...).
std::map<std::string, std::string> parse_scontrol_job(const std::string& line);

// A job state SLURM has ended the job with (COMPLETED, CANCELLED, TIMEOUT,
// NODE_FAIL, ...); PENDING, RUNNING, COMPLETING and the like are not.
bool slurm_job_ended(const std::string& state);

// The port part 0 serves the rendezvous on, the same on every part: from the
// job id and how often it was requeued (a new port for each run of the job).
int slurm_master_port(const std::string& job_id, int64_t restarts = 0);

// The run's outcome and words when SLURM, not its ranks, ended the job:
// nothing when the state leaves it to the parts (COMPLETED). `lost_nodes`
// are the allocated nodes whose part never ended.
struct RunOutcome {
  std::string outcome;  // finished, failed, killed, oom
  std::string message;
};
std::optional<RunOutcome> slurm_job_outcome(const std::string& job_id,
                                            const std::map<std::string, std::string>& job,
                                            const std::vector<std::string>& lost_nodes);

}  // namespace flotilla::agent
