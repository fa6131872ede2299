-- What a node needs beyond its address: binaries already installed there (or
-- empty: deploy the bundle), and what its last probe found.
ALTER TABLE nodes ADD COLUMN agent_path TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN probe_json TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN probed_ms INTEGER;
