#pragma once
// A database of some runs only, copied out of a bigger one: what a study's
// report keeps beside itself (`study.db`), so that its numbers can be
// recomputed from their records after the database they ran in is gone.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace flotilla::controller {

class Store;

// Writes a new database at `target` (replacing one there) holding, from
// `store`, the runs `run_ids` with everything stored of them (records, state
// transitions, nodes, step buckets, their experiments), every link bench
// (compare's link utilisation reads them) and sweep `sweep_id` with its
// points. Nodes' access (hosts, users, keys) is not copied, nor the sweep's
// owner; a sweep's source file keeps its name only. A `target` that is
// `store`'s own file is left as it is. Throws StoreError naming the file.
void keep_runs(Store& store, const std::vector<std::string>& run_ids,
               std::optional<int64_t> sweep_id, const std::filesystem::path& target);

}  // namespace flotilla::controller
