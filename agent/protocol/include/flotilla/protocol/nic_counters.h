#pragma once
// A node's network traffic as vnstat counts it: the kernel's cumulative byte
// counters of each interface (/proc/net/dev). The agent samples them for the
// System panel; the engine reads them around each epoch's training, so that a
// node's traffic per epoch is the counters' difference over exactly that
// epoch (seed 003's rx/tx per epoch per server).

#include <cstdint>
#include <map>
#include <string>

namespace flotilla::protocol {

struct NicBytes {
  uint64_t rx = 0, tx = 0;
};

// Every interface's counters by name; empty when the file cannot be read.
std::map<std::string, NicBytes> read_nic_bytes(const std::string& proc_net_dev = "/proc/net/dev");

// The sum over every interface but the loopback: what crossed the node's
// network, not what its processes said to each other.
NicBytes external_nic_bytes(const std::map<std::string, NicBytes>& interfaces);

}  // namespace flotilla::protocol
