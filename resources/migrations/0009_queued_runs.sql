-- A run submitted to a SLURM cluster waits in its queue: 'queued', with
-- SLURM's reason, between 'starting' and 'running'. The state's CHECK is
-- widened in place (SQLite's documented procedure for loosening a
-- constraint: every stored row still holds, nothing is copied; the runner
-- bumps schema_version so that every connection reads the schema again).
-- Rebuilding the table instead would cascade-delete every record.
PRAGMA writable_schema = ON;
UPDATE sqlite_master SET sql = replace(sql, '''starting'', ''running''', '''starting'', ''queued'', ''running''') WHERE type = 'table' AND name = 'runs';
PRAGMA writable_schema = OFF;
