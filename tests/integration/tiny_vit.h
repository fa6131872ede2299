#pragma once
// A ViT small enough for process tests of pipelines on a 2-core machine: six
// blocks (patch embedding, four encoder blocks, head) on synthetic 16x16
// images of 4 classes, one thread a rank.

#include <string>

namespace flotilla::testing {

// Two pipelines of two stages cut [3, 3] over 4 ranks, 16 samples a replica
// in 2 micro-batches, 2 epochs of 8 steps; blocks 0-4 frozen from step 6 on.
// `extra` is appended (elastic:, name:, ...).
inline std::string tiny_vit_pipeline_ddp(const std::string& extra) {
  return R"(
model: vit
vit: {patch: 4, depth: 4, dim: 32, heads: 4, mlp_dim: 64}
dataset: synthetic
synthetic: {shape: [3, 16, 16], classes: 4, train_samples: 256, test_samples: 64}
batch_size: 16
chunks: 2
epochs: 2
strategy: pipeline_ddp
ranks_per_node: 4
replicas: 2
balance: [3, 3]
freeze: {method: fixed, schedule: [{at_step: 6, blocks: 5}]}
seed: 5
threads: 1
)" + extra;
}

}  // namespace flotilla::testing
