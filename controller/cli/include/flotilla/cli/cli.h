#pragma once
// The `flotilla` command line: run, attach, runs, show, kill, experiments.
// Needs a QCoreApplication (QtSql loads its driver through it).

namespace flotilla::controller {

// Exit status: 0 finished (or done), 1 failed, 2 bad input, 3 oom, 4 killed.
int run_cli(int argc, char** argv);

}  // namespace flotilla::controller
