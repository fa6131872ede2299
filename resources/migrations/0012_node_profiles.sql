-- `flotilla nodes profile`: a node times a config's blocks, optimizer and
-- core sharing (flotilla-train --profile-blocks) in a run of its own, whose
-- rank 0 sends one `profile` record. This table says which runs are such
-- profiles and of which node; the profile stays in the run's records.
CREATE TABLE node_profiles (
  run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  node TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX node_profiles_by_node ON node_profiles (node, created_ms);
