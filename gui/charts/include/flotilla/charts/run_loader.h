#pragma once
// Reads what a view draws from the store: a run's row, transitions and
// nodes, then its records at full resolution, or, for a first paint of a long
// run, its step buckets in place of the step records. Only reads: a view
// opens the store read-only and never writes to it.

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "flotilla/charts/run_data.h"

namespace flotilla::charts {

inline constexpr int64_t kRecordsPerRead = 20000;

class RunNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A load given up because `cancelled` said so (a view showing another run).
class LoadCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Asked before each page of a load: true stops it (LoadCancelled).
using CancelCheck = std::function<bool()>;

// Every record of the run, read kRecordsPerRead at a time. Throws
// RunNotFound naming the run and database. With `limits`, older rows are
// folded as they come (RowLimits), and go on being folded as
// load_new_records adds more. With `cancelled`, it is asked before each
// page: a superseded load stops at its next page (LoadCancelled).
RunData load_run(const controller::Store& store, const std::string& run_id,
                 const std::optional<RowLimits>& limits = std::nullopt,
                 const CancelCheck& cancelled = {});
// The run with each rank's steps from the store's step buckets (one row a
// bucket of controller::kStepsPerBucket steps: the mean, with the lowest and
// highest value), and its other records in full.
RunData load_run_coarse(const controller::Store& store, const std::string& run_id);
// Whether the run has more step records than `limit` (read from its buckets,
// without touching the records): then a first paint should be coarse.
bool has_more_steps_than(const controller::Store& store, const std::string& run_id, int64_t limit);
// Adds the records stored since `data` was read (each node's after its last
// seq) and refreshes the run row and transitions; returns how many records
// came. `data` must be at full resolution.
size_t load_new_records(const controller::Store& store, RunData& data);

}  // namespace flotilla::charts
