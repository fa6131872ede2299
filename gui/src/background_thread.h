#pragma once
// The window's helper threads (loaders, the controller worker) run at a
// lower CPU priority than the window's own thread: when both want a core, the
// one that answers input gets it.

class QThread;

namespace flotilla::gui {

// Starts `thread`, named `name` (what ps and /proc show, 15 characters at
// most); it, and the threads it starts, run `kNicer` nice levels below the
// window's.
void start_below_the_window(QThread& thread, const char* name);
inline constexpr int kNicer = 10;

}  // namespace flotilla::gui
