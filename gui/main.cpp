// flotilla-gui: the desktop window over the controller; its command line is
// gui/src/gui_program.cpp.
#include "gui_program.h"

int main(int argc, char** argv) {
  return flotilla::gui::run_program(argc, argv);
}
