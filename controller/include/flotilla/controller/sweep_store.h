#pragma once
// Sweeps in the database (resources/migrations/0005_sweeps.sql): a sweep and
// every point of its grid, a queue worked through one point at a time by the
// one controller that owns the sweep. Every change is one statement or one
// transaction on the store's writer, guarded by the state it expects, so that
// two controllers (two processes) never both move a point.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flotilla/controller/store.h"
#include "flotilla/protocol/sweep.h"

namespace flotilla::controller {

enum class SweepState { running, finished, killed };
enum class PointState { queued, running, finished, failed, oom, killed, skipped, refused };

std::string_view name_of(SweepState state);
std::string_view name_of(PointState state);
std::optional<PointState> point_state_from_name(std::string_view name);
// The point state a run's end gives (finished, failed, oom, killed).
PointState point_state_of(RunState run_end);

struct SweepRow {
  int64_t id = 0;
  std::string name;
  std::string spec_json;  // flotilla::sweep_to_json
  std::string source;     // the file it was read from
  SweepState state = SweepState::running;
  std::string reason;
  int64_t created_ms = 0;
  std::optional<int64_t> ended_ms;
  std::string owner;  // the controller running it, '' when none
  std::optional<int64_t> owner_seen_ms;
};

struct SweepPointRow {
  int64_t sweep_id = 0;
  int64_t index = 0;
  std::string values_json;
  std::vector<int64_t> coords;
  int64_t repeat = 0;
  std::string config_json;  // '' when refused
  PointState state = PointState::queued;
  std::string run_id;  // '' until claimed
  std::string reason;
  std::optional<int64_t> started_ms, ended_ms;
};

// How many points of a sweep are in each state.
struct SweepProgress {
  int64_t total = 0, queued = 0, running = 0, finished = 0, failed = 0, oom = 0, killed = 0,
          skipped = 0, refused = 0;
  int64_t done() const { return finished + failed + oom + killed; }
};
SweepProgress progress_of(const std::vector<SweepPointRow>& points);

class SweepStore {
 public:
  explicit SweepStore(Store& store) : store_(store) {}

  // Stores the sweep and every point (refused ones `refused`, with the
  // validator's words, the rest `queued`), owned by `owner` from the start.
  // Throws StoreError when a sweep of that name exists.
  int64_t create(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                 const std::string& source, const std::string& owner);

  std::vector<SweepRow> sweeps() const;
  std::optional<SweepRow> sweep(const std::string& name) const;
  std::vector<SweepPointRow> points(int64_t sweep_id) const;
  // The point whose run is `run`, if a sweep started it.
  std::optional<SweepPointRow> point_of_run(const std::string& run) const;

  // Makes `owner` the sweep's owner if it is running and no live controller
  // owns it (`is_alive` judges the stored owner); otherwise false, with the
  // owner in `holder`. Atomic: of two controllers asking at once, one gets it.
  bool take_ownership(
      int64_t sweep, const std::string& owner,
      const std::function<bool(const std::string& owner, int64_t seen_ms)>& is_alive,
      std::string* holder = nullptr);
  // The owner says it is still there; false when it no longer owns the sweep.
  bool renew_ownership(int64_t sweep, const std::string& owner);
  void release_ownership(int64_t sweep, const std::string& owner);

  // queued -> running with `run_id`, only if the point is still queued and
  // `owner` owns the running sweep; whether it moved.
  bool claim(int64_t sweep, int64_t index, const std::string& run_id, const std::string& owner);
  // running -> queued, for a point whose run was never created.
  bool requeue(int64_t sweep, int64_t index);
  // running -> `state` with its reason; whether it moved.
  bool end_point(int64_t sweep, int64_t index, PointState state, const std::string& reason);
  // queued -> skipped, each with its reason; the indexes that moved.
  std::vector<int64_t> skip(int64_t sweep, const std::vector<DroppedPoint>& points);
  // running -> finished once no point is queued or running; whether it moved.
  bool finish_if_done(int64_t sweep);
  // running -> killed, and every queued point skipped with `reason`; false
  // when the sweep had already ended.
  bool kill(int64_t sweep, const std::string& reason);

 private:
  Store& store_;
};

}  // namespace flotilla::controller
