// crash_trace: an LD_PRELOAD library for machines without gdb. On SIGSEGV,
// SIGBUS, SIGFPE, SIGILL and SIGABRT, and from std::terminate (an uncaught
// exception: the throwing frames are still on the stack), it prints the
// stack to stderr as "module+0xOFFSET symbol", then lets the process die as it
// would have. gpu_check.sh builds it and resolves the offsets with addr2line.
//   g++ -shared -fPIC -O1 -o libcrash_trace.so crash_trace.cpp -ldl
//   LD_PRELOAD=$PWD/libcrash_trace.so program ...
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <typeinfo>

namespace {

void print_stack(const char* why) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  char line[1024];
  int len = std::snprintf(line, sizeof line, "\n*** crash_trace (pid %d): %s\n", getpid(), why);
  (void)!write(2, line, len);
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    const char* module = "?";
    const char* name = "";
    char* demangled = nullptr;
    unsigned long offset = reinterpret_cast<unsigned long>(frames[i]);
    if (dladdr(frames[i], &info) && info.dli_fname) {
      module = info.dli_fname;
      // One byte back: the return address may already belong to the next line.
      offset = reinterpret_cast<unsigned long>(frames[i]) -
               reinterpret_cast<unsigned long>(info.dli_fbase) - (i > 0 ? 1 : 0);
      if (info.dli_sname) {
        int status = 0;
        demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
        name = demangled ? demangled : info.dli_sname;
      }
    }
    len = std::snprintf(line, sizeof line, "  #%-2d %s+0x%lx %.700s\n", i, module, offset, name);
    (void)!write(2, line, len > 0 && len < static_cast<int>(sizeof line) ? len : sizeof line - 1);
    std::free(demangled);
  }
}

void on_signal(int sig) {
  char why[64];
  std::snprintf(why, sizeof why, "signal %d (%s)", sig, strsignal(sig));
  print_stack(why);
  signal(sig, SIG_DFL);
  raise(sig);
}

std::terminate_handler previous = nullptr;

void on_terminate() {
  char why[512] = "std::terminate";
  if (auto* type = abi::__cxa_current_exception_type()) {
    int status = 0;
    char* name = abi::__cxa_demangle(type->name(), nullptr, nullptr, &status);
    std::snprintf(why, sizeof why, "std::terminate with an uncaught %s",
                  name ? name : type->name());
    std::free(name);
  }
  print_stack(why);
  signal(SIGABRT, SIG_DFL);
  if (previous) previous();
  std::abort();
}

__attribute__((constructor)) void install() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigaction(sig, &action, nullptr);
  }
  // Not through the allocator: the trace must also work when memory ran out.
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc_s now, not inside a signal handler
  previous = std::set_terminate(on_terminate);
}

}  // namespace
