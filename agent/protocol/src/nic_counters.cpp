#include "flotilla/protocol/nic_counters.h"

#include <fstream>
#include <sstream>

namespace flotilla::protocol {

std::map<std::string, NicBytes> read_nic_bytes(const std::string& proc_net_dev) {
  std::map<std::string, NicBytes> out;
  std::ifstream in(proc_net_dev);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    std::istringstream fields(line.substr(colon + 1));
    uint64_t v[9] = {};
    for (auto& x : v) fields >> x;
    // Receive: bytes packets errs drop fifo frame compressed multicast; then transmit bytes.
    out[name] = {v[0], v[8]};
  }
  return out;
}

NicBytes external_nic_bytes(const std::map<std::string, NicBytes>& interfaces) {
  NicBytes sum;
  for (const auto& [name, bytes] : interfaces)
    if (name != "lo") {
      sum.rx += bytes.rx;
      sum.tx += bytes.tx;
    }
  return sum;
}

}  // namespace flotilla::protocol
