#pragma once
// Nodes as the user names them: checking what `nodes add` is given, asking
// an agent what its node is, and describing the answer.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flotilla/controller/store.h"
#include "flotilla/protocol/messages.h"
#include "transport.h"

namespace flotilla::controller {

// One "field: what is wrong" line per problem; empty when `node` may be stored.
// Names, hosts, users and tags are restricted to characters that are safe in
// file names and command lines; everything sent to a shell is quoted anyway.
std::vector<std::string> validate_node(const NodeRow& node);

// Greets the agent behind `transport`, asks what its node is, and returns the
// answer; throws std::runtime_error naming the node when none comes in time.
protocol::ProbeReply probe_agent(const std::string& node, std::unique_ptr<Transport> transport,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

// The probe as stored in the database, and as one line of `nodes list`.
std::string probe_to_json(const protocol::ProbeReply& probe);
std::string probe_summary(const std::string& probe_json);

}  // namespace flotilla::controller
