#pragma once
// What a SLURM login node knows of its cluster, from the client commands
// every site installs there (sinfo): the version, the partitions and their
// nodes, each node's CPUs, GPUs (gres) and state. The parsers are separate
// so that sinfo's formats are tested without a cluster.

#include <optional>
#include <string>
#include <vector>

#include "flotilla/protocol/messages.h"

namespace flotilla::agent {

// Nothing where the shell finds no `sinfo`; otherwise the cluster, or what kept
// sinfo from answering in `error`.
std::optional<protocol::SlurmInfo> probe_slurm();

// "slurm 22.05.8" -> "22.05.8".
std::string parse_sinfo_version(const std::string& output);
// Lines of `sinfo -h -N -o '%N|%P|%T|%c|%G'`: one per node and partition,
// the default partition marked with '*'. Fills partitions and nodes.
void parse_sinfo_nodes(const std::string& output, protocol::SlurmInfo& info);
// Lines of `sinfo -h -o '%R|%a|%l'`: each partition's availability and
// time limit, added to the partitions parse_sinfo_nodes found.
void parse_sinfo_partitions(const std::string& output, protocol::SlurmInfo& info);
// GPUs in a gres string: "gpu:4" 4, "gpu:a100:2(S:0-1),gpu:v100:1" 3, "(null)" 0.
int64_t gpus_in_gres(const std::string& gres);

}  // namespace flotilla::agent
