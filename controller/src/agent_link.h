#pragma once
// One connection to one node's agent: the protocol over a Transport. A reader
// thread decodes the agent's lines and hands each message to `on_message`;
// malformed lines are counted and reported through `on_problem`, never fatal.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flotilla/protocol/line_buffer.h"
#include "flotilla/protocol/messages.h"
#include "transport.h"

namespace flotilla::controller {

struct LinkEvents {
  std::function<void(const protocol::Message&)> on_message;
  // Where set, the messages of each read at once instead (in order): one
  // hand-over a read rather than one a message, for a reader that posts
  // them to another thread.
  std::function<void(std::vector<protocol::Message>&&)> on_messages;
  std::function<void(const std::string& problem)> on_problem;
  std::function<void()> on_closed;  // the agent's end went away
};

class AgentLink {
 public:
  // Greets the agent and waits for its hello; throws std::runtime_error with
  // the agent's words on a version mismatch, or when no hello comes in `timeout`.
  AgentLink(std::string node, std::unique_ptr<Transport> transport, LinkEvents events,
            std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~AgentLink();  // closes the connection; the node's runs go on
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  const std::string& node() const { return node_; }
  // False once the agent's end is gone.
  bool send(const protocol::Message& message);
  bool open() const { return open_; }
  // The reader thread has returned (after on_closed): destroying the link
  // now waits for nothing.
  bool finished() const { return finished_; }
  // What the agent's hello said it can do ("start", "probe", ...).
  bool has_capability(const std::string& capability) const;
  int64_t malformed_lines() const { return malformed_; }

 private:
  void read_loop();
  // Decodes the complete lines in `bytes`, handing each message to `deliver`.
  void feed(std::string_view bytes, const std::function<void(protocol::Message)>& deliver);
  void report_malformed(const std::string& reason);

  std::string node_;
  std::vector<std::string> capabilities_;
  std::unique_ptr<Transport> transport_;
  LinkEvents events_;
  protocol::LineBuffer lines_;
  int64_t line_number_ = 0;
  std::atomic<int64_t> malformed_{0};
  std::atomic<bool> open_{true};
  std::atomic<bool> closing_{false};
  std::atomic<bool> finished_{false};
  std::thread reader_;
};

}  // namespace flotilla::controller
