-- Flotilla's first schema. One statement per `;`-terminated line group;
-- applied in one transaction by the controller's migrator.
CREATE TABLE experiments (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  config_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE nodes (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  host TEXT NOT NULL,
  port INTEGER NOT NULL DEFAULT 22,
  user TEXT NOT NULL DEFAULT '',
  key_file TEXT NOT NULL DEFAULT '',
  remote_dir TEXT NOT NULL DEFAULT '',
  tags TEXT NOT NULL DEFAULT ''
);
INSERT INTO nodes (name, host) VALUES ('local', 'localhost');
CREATE TABLE runs (
  id TEXT PRIMARY KEY,
  experiment_id INTEGER REFERENCES experiments(id) ON DELETE SET NULL,
  experiment_name TEXT NOT NULL,
  config_json TEXT NOT NULL,
  nodes TEXT NOT NULL,
  world_size INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('created', 'starting', 'running', 'finished', 'failed', 'killed', 'oom')),
  reason TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  starting_ms INTEGER,
  running_ms INTEGER,
  ended_ms INTEGER
);
CREATE INDEX runs_by_state ON runs (state);
CREATE TABLE run_transitions (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  state TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE records (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  node TEXT NOT NULL,
  rank INTEGER NOT NULL,
  type TEXT NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (run_id, node, seq)
) WITHOUT ROWID;
