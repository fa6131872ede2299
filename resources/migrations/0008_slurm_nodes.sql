-- A node is reached over SSH (kind 'ssh', every node before this version) or
-- is the login node of a SLURM cluster (kind 'slurm'), whose runs are jobs
-- submitted there. A SLURM node's partition and account are what its jobs
-- ask for unless a run says otherwise; '' leaves the choice to SLURM.
ALTER TABLE nodes ADD COLUMN kind TEXT NOT NULL DEFAULT 'ssh';
ALTER TABLE nodes ADD COLUMN slurm_partition TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN slurm_account TEXT NOT NULL DEFAULT '';
