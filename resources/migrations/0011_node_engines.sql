-- A node whose bundled engine cannot use what it has (its GPUs and CUDA
-- LibTorch, or a LibTorch the person names) builds its own flotilla-train
-- there. torch_prefix: the LibTorch to build against ('' finds python3's
-- torch when the node's GPUs need one). engine_json: what the last build
-- made ({path, source, torch_version, torch_prefix, cuda}); '' runs the
-- bundle's engine.
ALTER TABLE nodes ADD COLUMN torch_prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN engine_json TEXT NOT NULL DEFAULT '';
