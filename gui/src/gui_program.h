#pragma once
// flotilla-gui's command line (the window, --render, --screenshot, --help),
// in the library so that the program's main is one line and tests can reach it.

namespace flotilla::gui {

// Runs flotilla-gui with main's arguments; returns its exit status (2: bad
// input, every problem named). --help is answered without a display.
int run_program(int argc, char** argv);

}  // namespace flotilla::gui
