#include "agent_link.h"

#include <algorithm>
#include <stdexcept>

namespace flotilla::controller {

AgentLink::AgentLink(std::string node, std::unique_ptr<Transport> transport, LinkEvents events,
                     std::chrono::milliseconds timeout)
    : node_(std::move(node)), transport_(std::move(transport)), events_(std::move(events)) {
  if (!send(protocol::Hello{"controller", "flotilla", {"records", "resume"}}))
    throw std::runtime_error("node " + node_ + ": " + transport_->describe() +
                             " closed before the hello");
  // The handshake happens here, before the reader thread, so that a bad agent
  // is an error for whoever opened the link.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<protocol::Hello> hello;
  std::string refusal;
  std::vector<protocol::Message> early;  // anything after the hello in the same read
  while (!hello && refusal.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw std::runtime_error("node " + node_ + ": no hello from " + transport_->describe() +
                               " within " + std::to_string(timeout.count() / 1000) + " s");
    auto bytes = transport_->read(std::min(left, std::chrono::milliseconds(200)));
    if (!bytes)
      throw std::runtime_error("node " + node_ + ": " + transport_->describe() +
                               " exited during the hello");
    feed(*bytes, [&](protocol::Message m) {
      if (hello)
        early.push_back(std::move(m));
      else if (auto* h = std::get_if<protocol::Hello>(&m))
        hello = *h;
      else if (auto* e = std::get_if<protocol::Error>(&m))
        refusal = e->message;
    });
  }
  if (!refusal.empty())
    throw std::runtime_error("node " + node_ + ": the agent refused: " + refusal);
  if (hello->version != protocol::kVersion)
    throw std::runtime_error("node " + node_ + ": the agent speaks protocol version " +
                             std::to_string(hello->version) + ", this controller " +
                             std::to_string(protocol::kVersion));
  capabilities_ = hello->capabilities;
  if (events_.on_messages) {
    if (!early.empty()) events_.on_messages(std::move(early));
  } else {
    for (auto& m : early) events_.on_message(m);
  }
  reader_ = std::thread([this] { read_loop(); });
}

AgentLink::~AgentLink() {
  closing_ = true;
  transport_->close();
  if (reader_.joinable()) reader_.join();
}

bool AgentLink::has_capability(const std::string& capability) const {
  return std::find(capabilities_.begin(), capabilities_.end(), capability) != capabilities_.end();
}

bool AgentLink::send(const protocol::Message& message) {
  if (!transport_->write(protocol::encode(message) + "\n")) {
    open_ = false;
    return false;
  }
  return true;
}

void AgentLink::report_malformed(const std::string& reason) {
  ++malformed_;
  if (events_.on_problem)
    events_.on_problem("node " + node_ + ": malformed line " + std::to_string(line_number_) +
                       " from the agent (" + std::to_string(malformed_.load()) +
                       " so far): " + reason);
}

void AgentLink::feed(std::string_view bytes,
                     const std::function<void(protocol::Message)>& deliver) {
  lines_.feed(
      bytes,
      [&](std::string_view line) {
        ++line_number_;
        if (line.empty()) return;
        try {
          deliver(protocol::decode(line));
        } catch (const protocol::DecodeError& e) {
          report_malformed(e.what());
        }
      },
      [&](size_t length) {
        ++line_number_;
        report_malformed("a line of " + std::to_string(length) + " bytes is longer than the " +
                         std::to_string(protocol::kMaxLineBytes) + " allowed");
      });
}

void AgentLink::read_loop() {
  while (!closing_) {
    auto bytes = transport_->read(std::chrono::milliseconds(200));
    if (!bytes) break;
    if (events_.on_messages) {
      std::vector<protocol::Message> read;
      feed(*bytes, [&](protocol::Message m) { read.push_back(std::move(m)); });
      if (!read.empty()) events_.on_messages(std::move(read));
    } else {
      feed(*bytes, [&](protocol::Message m) { events_.on_message(m); });
    }
  }
  open_ = false;
  if (!closing_ && events_.on_closed) events_.on_closed();
  finished_ = true;
}

}  // namespace flotilla::controller
