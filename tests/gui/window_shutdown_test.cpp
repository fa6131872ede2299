// Closing the window while the controller's worker waits on a node that does
// not answer (a TCP listener that never speaks SSH: the connect waits for a
// banner until its timeout, 15 s) returns within 2 s: the window does not
// wait on the worker without limit.
#include <gtest/gtest.h>

#include <QElapsedTimer>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>

#include "flotilla/controller/store.h"
#include "main_window.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace flotilla::gui {
namespace {

using namespace std::chrono_literals;

// A socket on 127.0.0.1 that listens and never accepts: the kernel completes
// each connection, and nothing is ever said on it.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      throw std::runtime_error("cannot listen on 127.0.0.1");
    port_ = ntohs(address.sin_port);
  }
  ~SilentListener() {
    if (client_ >= 0) ::close(client_);
    ::close(fd_);
  }
  int port() const { return port_; }
  // Whether a connection waits to be accepted.
  bool connected() const {
    pollfd fd{fd_, POLLIN, 0};
    return ::poll(&fd, 1, 0) == 1;
  }
  // Whether the connection that waited has been given up by its client
  // (accepted here, and closed there).
  bool givenUp() {
    if (client_ < 0) client_ = ::accept(fd_, nullptr, nullptr);
    if (client_ < 0) return false;
    pollfd fd{client_, POLLIN, 0};
    char byte;
    return ::poll(&fd, 1, 0) == 1 && ::recv(client_, &byte, 1, MSG_DONTWAIT) == 0;
  }

 private:
  int fd_ = -1;
  int client_ = -1;
  int port_ = 0;
};

TEST(WindowShutdown, ClosingWhileANodeDoesNotAnswerReturnsWithinTwoSeconds) {
  testing::TempDir dir;
  qputenv("FLOTILLA_HOME", QByteArray::fromStdString((dir.path() / "home").string()));
  const QString db = QString::fromStdString((dir.path() / "gui.db").string());
  SilentListener silent;
  {
    controller::Store store(db);
    controller::NodeRow node;
    node.name = "silent";
    node.host = "127.0.0.1";
    node.port = silent.port();
    node.user = "nobody";
    store.add_node(node);
  }
  auto window = std::make_unique<MainWindow>(db, FLOTILLA_AGENT_BINARY);
  window->show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(window.get()));
  // Short, so that the worker left behind is done before the test ends.
  window->setConnectTimeout(4000);
  emit window->requestProbe({"silent"});
  // The probe's SSH connect is under way, waiting for a banner.
  ASSERT_TRUE(wait_until([&] { return silent.connected(); }, 10s));
  QElapsedTimer closing;
  closing.start();
  window.reset();
  EXPECT_LE(closing.elapsed(), 2000) << "closing the window took " << closing.elapsed() << " ms";
  // The probe gives up at its timeout and the worker left behind ends.
  EXPECT_TRUE(wait_until([&] { return silent.givenUp(); }, 30s));
}

}  // namespace
}  // namespace flotilla::gui
