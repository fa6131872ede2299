-- Sweeps: a base experiment and axes over its config keys, stored with every
-- point of their grid as a queue that a controller works through one point at
-- a time (controller/src/sweep_store.h; docs/sweeps.md).
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  -- The sweep as parsed, its base inline (flotilla/protocol/sweep.h's sweep_to_json).
  spec_json TEXT NOT NULL,
  -- The file it was read from, as given; '' when none.
  source TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK (state IN ('running', 'finished', 'killed')),
  reason TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  -- The controller that runs it ("host pid start-time nonce") and when it last
  -- said so; '' when none does. Only the owner claims points.
  owner TEXT NOT NULL DEFAULT '',
  owner_seen_ms INTEGER
);
CREATE TABLE sweep_points (
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  -- {"axis": value, ...} in axis order, and each axis's value index.
  values_json TEXT NOT NULL,
  coords_json TEXT NOT NULL,
  repetition INTEGER NOT NULL,
  -- The point's validated experiment; '' when the validator refused it.
  config_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'failed', 'oom', 'killed', 'skipped', 'refused')),
  -- The run started for it. Chosen when the point is claimed, before the run
  -- row exists, so that a new owner can tell a run that never started from
  -- one to follow: no foreign key.
  run_id TEXT NOT NULL DEFAULT '',
  -- Why it ended so: the run's reason, "oom at batch_size 512", the validator's words.
  reason TEXT NOT NULL DEFAULT '',
  started_ms INTEGER,
  ended_ms INTEGER,
  PRIMARY KEY (sweep_id, idx)
) WITHOUT ROWID;
CREATE INDEX sweep_points_by_state ON sweep_points (sweep_id, state);
