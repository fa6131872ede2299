-- `flotilla nodes bench`: an all-reduce size sweep over a set of nodes, run
-- as a run of its own whose ranks emit `bench` records (one per size). This
-- table says which runs are such sweeps and over which nodes; the numbers
-- stay in the run's records, stored once like every record. node_set is the
-- node names sorted and comma-joined, so that a sweep over "b,a" serves a
-- training run on "a,b".
CREATE TABLE link_benches (
  run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  node_set TEXT NOT NULL,
  ranks_per_node INTEGER NOT NULL,
  device TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX link_benches_by_node_set ON link_benches (node_set, created_ms);
