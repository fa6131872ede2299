// flotilla-agent: serves the controller's protocol on stdin/stdout, and
// (as `flotilla-agent supervise`) supervises one run's ranks, detached.
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>

#include "processes.h"
#include "run_directory.h"
#include "session.h"
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
  supervise->add_option("--run", run, "run name")->required();
  supervise->add_option("--home", home, "state directory");
  supervise->add_option("--train-binary", train, "the flotilla-train program");
  CLI11_PARSE(app, argc, argv);

  // A controller that goes away must not take the agent down mid-write.
  std::signal(SIGPIPE, SIG_IGN);
  if (*supervise) return agent::run_supervisor({home, run, train});
  agent::Session session({home, train}, 0, 1);
  return session.serve();
}
