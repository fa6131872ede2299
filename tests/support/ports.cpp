#include "ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <stdexcept>
#include <thread>

namespace flotilla::testing {

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot bind a port on 127.0.0.1");
  }
  ::close(fd);
  return ntohs(address.sin_port);
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
