#pragma once
// How the controller reaches nodes over SSH, and the host-key refusals a
// person has to answer: part of the controller's public API so that the
// window can ask the question without knowing about SSH sessions.

#include <chrono>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>

namespace flotilla::controller {

struct ConnectOptions {
  bool trust_new_host_key = false;  // accept and remember any unknown host key
  // Node name -> the fingerprint ("SHA256:...") a person was shown and
  // confirmed for it: that node's unknown host key is recorded only when it
  // is this one, and refused (HostKeyError::Kind::not_confirmed) otherwise,
  // whatever trust_new_host_key says.
  std::map<std::string, std::string> confirmed_host_keys;
  std::filesystem::path known_hosts;   // empty: known_hosts next to the database's default
  std::filesystem::path agent_binary;  // this machine's flotilla-agent; empty: next to this program
  std::chrono::milliseconds timeout{15000};
  // How much nicer (lower CPU priority, as nice(1) counts) than this program
  // the local node's agent runs, and with it the ranks it starts: the window
  // asks for some so that local ranks, busy on every core, never starve the
  // thread a person clicks on. 0: the same priority.
  int local_agent_niceness = 0;
};

// An unknown host key (refused unless trusted explicitly), one that differs
// from the stored one (always refused), or an unknown one that is not the key
// a person confirmed (refused: the key was swapped after it was shown).
class HostKeyError : public std::runtime_error {
 public:
  enum class Kind { unknown, changed, not_confirmed };
  HostKeyError(Kind kind, std::string fingerprint, const std::string& message)
      : std::runtime_error(message), kind_(kind), fingerprint_(std::move(fingerprint)) {}
  Kind kind() const { return kind_; }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  Kind kind_;
  std::string fingerprint_;
};

// Flotilla's own known_hosts (never the system's or ~/.ssh's).
std::filesystem::path default_known_hosts();

}  // namespace flotilla::controller
