-- `flotilla run --predict` (docs/predict.md): the step predicted before the
-- run started, kept beside it so that compare sets predicted against
-- measured. plan_json is flotilla-train --plan --predict's whole document.
CREATE TABLE run_predictions (
  run_id TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  plan_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
