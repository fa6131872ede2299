#pragma once
// A byte stream to one node's agent: a local pipe now, an SSH channel later.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace flotilla::controller {

class Transport {
 public:
  virtual ~Transport() = default;
  // Writes all of `bytes`; false once the agent's end is gone.
  virtual bool write(std::string_view bytes) = 0;
  // Some bytes, "" when `timeout` passed without any, nullopt once closed.
  virtual std::optional<std::string> read(std::chrono::milliseconds timeout) = 0;
  // Ends the connection (the agent exits; its runs go on).
  virtual void close() = 0;
  virtual std::string describe() const = 0;
};

// Starts `agent_binary` as a child on a pair of pipes. Throws
// std::runtime_error naming the program when it cannot be started.
// `niceness` above this process's (the agent's ranks inherit it).
std::unique_ptr<Transport> start_local_agent(const std::filesystem::path& agent_binary,
                                             int niceness = 0);

}  // namespace flotilla::controller
