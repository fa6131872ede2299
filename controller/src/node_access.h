#pragma once
// Nodes as the user names them: checking what `nodes add` is given, asking
// an agent what its node is, and describing the answer.

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "flotilla/controller/nodes.h"
#include "flotilla/controller/store.h"
#include "flotilla/protocol/messages.h"
#include "transport.h"

namespace flotilla::controller {

// validate_node and probe_summary are public: flotilla/controller/nodes.h.

// Greets the agent behind `transport`, asks what its node is, and returns the
// answer (with `slurm`, its SLURM cluster too); throws std::runtime_error
// naming the node when none comes in time.
protocol::ProbeReply probe_agent(const std::string& node, std::unique_ptr<Transport> transport,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                 bool slurm = false);

// Appends `entry` (one known_hosts line, as libssh exports it) to Flotilla's
// `known_hosts`. The file is created 0600 and its folder 0700 whatever the
// umask, and an existing file is made 0600: which hosts this person trusts
// is theirs alone. Throws std::runtime_error naming the file.
void record_known_host(const std::filesystem::path& known_hosts, const std::string& entry);

// The probe as stored in the database.
std::string probe_to_json(const protocol::ProbeReply& probe);

}  // namespace flotilla::controller
