-- A run's nodes as rows, looked up by equality: the comma-joined list they
-- replace was matched with LIKE, where a node name's `_` is a wildcard.
CREATE TABLE run_nodes (
  run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  node TEXT NOT NULL,
  PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE INDEX run_nodes_by_node ON run_nodes (node, run_id);
WITH RECURSIVE split(run_id, position, node, rest) AS (
  SELECT id, -1, '', nodes || ',' FROM runs
  UNION ALL
  SELECT run_id, position + 1, trim(substr(rest, 1, instr(rest, ',') - 1)),
         substr(rest, instr(rest, ',') + 1)
  FROM split WHERE rest <> ''
)
INSERT INTO run_nodes (run_id, position, node)
  SELECT run_id, position, node FROM split WHERE position >= 0 AND node <> '';
ALTER TABLE runs DROP COLUMN nodes;
-- Views load a run's records by kind and rank (the lead rank's steps, one
-- node's system records), not every record of every rank.
CREATE INDEX records_by_type_rank ON records (run_id, type, rank);
