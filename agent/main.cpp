// flotilla-agent: serves the controller's protocol on stdin/stdout, and
// (as `flotilla-agent supervise`) supervises one run's ranks, detached.
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>

#include "processes.h"
#include "run_directory.h"
#include "session.h"
#include "slurm_job.h"
#include "supervisor.h"

int main(int argc, char** argv) {
  namespace agent = flotilla::agent;
  CLI::App app{"Flotilla's node agent: starts, supervises, streams and stops training ranks."};
  std::string home = agent::default_home().string();
  std::string train = (agent::own_executable().parent_path() / "flotilla-train").string();
  app.add_option("--home", home, "state directory (runs, spools)");
  app.add_option("--train-binary", train, "the flotilla-train program");
  std::string run;
  auto* supervise =
      app.add_subcommand("supervise", "supervise one run (started by the agent itself)");
  bool slurm_part = false;
  auto* run_option = supervise->add_option("--run", run, "run name");
  supervise
      ->add_flag("--slurm-part", slurm_part,
                 "one node's part of a SLURM run, started by srun (the run is node-$SLURM_NODEID)")
      ->excludes(run_option);
  supervise->add_option("--home", home, "state directory");
  supervise->add_option("--train-binary", train, "the flotilla-train program");
  auto* slurm_job = app.add_subcommand(
      "slurm-job", "submit one run as a SLURM job and follow it (started by the agent itself)");
  slurm_job->add_option("--run", run, "run name")->required();
  slurm_job->add_option("--home", home, "state directory");
  slurm_job->add_option("--train-binary", train, "the flotilla-train program");
  CLI11_PARSE(app, argc, argv);

  // A controller that goes away must not take the agent down mid-write.
  std::signal(SIGPIPE, SIG_IGN);
  if (*supervise) {
    if (run.empty() && !slurm_part) {
      std::cerr << "flotilla-agent supervise: --run or --slurm-part is required\n";
      return 2;
    }
    agent::SupervisorOptions options{home, run, train};
    options.slurm_part = slurm_part;
    return agent::run_supervisor(options);
  }
  if (*slurm_job) return agent::run_slurm_job({home, run, agent::own_executable(), train});
  agent::Session session({home, train}, 0, 1);
  return session.serve();
}
