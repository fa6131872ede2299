#include "ports.h"

#include "node_probe.h"

#include <exception>
#include <stdexcept>
#include <thread>

namespace flotilla::testing {

int free_tcp_port() {
  // The agent's own pick, the one a run's rendezvous uses.
  const int port = agent::free_tcp_port();
  if (port == 0) throw std::runtime_error("no free TCP port on this machine");
  return port;
}

std::vector<std::string> run_ranks(int world, const std::function<void(int rank)>& body) {
  std::vector<std::string> failures(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank)
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (const std::exception& e) {
        failures[rank] = e.what();
      } catch (...) {
        failures[rank] = "unknown exception";
      }
    });
  for (auto& t : threads) t.join();
  return failures;
}

}  // namespace flotilla::testing
