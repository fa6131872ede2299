// The check that tells an unreachable node from one whose agent went away:
// a TCP connect to its SSH port, closed again at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ssh_session.h"

namespace flotilla::controller {
namespace {

using namespace std::chrono_literals;

TEST(TcpPortAnswers, APortWithAListenerAnswersAndTheSamePortClosedDoesNot) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  EXPECT_TRUE(tcp_port_answers("127.0.0.1", port, 1000ms));
  EXPECT_TRUE(tcp_port_answers("localhost", port, 1000ms));
  ::close(listener);
  EXPECT_FALSE(tcp_port_answers("127.0.0.1", port, 1000ms));
}

}  // namespace
}  // namespace flotilla::controller
