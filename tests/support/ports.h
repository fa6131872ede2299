#pragma once
// Network helpers for tests that run ranks on 127.0.0.1.

#include <functional>
#include <string>
#include <vector>

namespace flotilla::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick).
int free_tcp_port();

// Runs body(rank) on one thread per rank, as c10d's own tests do, and returns
// each rank's failure message ("" where it succeeded).
std::vector<std::string> run_ranks(int world, const std::function<void(int rank)>& body);

}  // namespace flotilla::testing
