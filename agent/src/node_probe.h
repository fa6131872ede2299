#pragma once
// What a node is, as the controller's `nodes probe` stores it: operating
// system, processors, memory, GPUs (NVML), free disk where runs are kept, and
// a TCP port free for a rendezvous.

#include <filesystem>

#include "flotilla/protocol/messages.h"

namespace flotilla::agent {

// With `slurm`, also the SLURM cluster whose client commands are installed here.
protocol::ProbeReply probe_node(const std::filesystem::path& home, bool slurm = false);

// A TCP port that the kernel handed out on every address a moment ago.
int free_tcp_port();

}  // namespace flotilla::agent
