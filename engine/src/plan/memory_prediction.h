#pragma once
// A rank's peak memory predicted before the run (issue 27): what the process
// holds once its data and model are loaded, plus what training adds on top,
// each part measured by the planner (plan_prediction.cpp, tensor_memory.h)
// and composed here. The same sum on both devices: on the CPU the run
// reports its ranks' resident memory (the kernel's high-water mark), on CUDA
// the caching allocator's peak; docs/predict.md says what it leaves out.

#include <cstdint>
#include <vector>

namespace flotilla::predict {

// One block's tensors for one micro-batch, as the planner measured them.
struct BlockMemory {
  int64_t held = 0;          // from its forward until its backward: output and saved tensors
  int64_t peak = 0;          // the most above what was held before its forward, through
                             // forward and backward (its gradients and temporaries too)
  int64_t gradient = 0;      // its trainable parameters' gradients
  bool frozen = false;       // forward only: nothing held for a backward
  int64_t forward_peak = 0;  // the most above that through its forward alone
  // Evaluating (eval mode, no gradients, the evaluation batch): the most held
  // while it runs, its input included.
  int64_t evaluation_peak = 0;
};

struct RankMemoryInputs {
  // The process once its data set and model are loaded (the planner's own,
  // which loads them as a rank does): what it holds then, and the most it
  // held while loading (decoding a data set can pass through more than it
  // keeps).
  int64_t loaded_bytes = 0;
  int64_t loaded_peak_bytes = 0;
  int64_t runtime_bytes = 0;          // resident besides tensors once training runs (CPU)
  std::vector<BlockMemory> blocks;    // this rank's, in model order
  int64_t optimizer_state_bytes = 0;  // momentum, Adam's moments: held throughout
  int64_t live_micro_batches = 1;     // at most alive at once under its schedule
  int64_t received_bytes = 0;         // one micro-batch's input from the stage before
  int64_t bucket_bytes = 0;           // DDP's flattened gradient buckets, all in flight
};

struct RankMemory {
  int64_t training_bytes = 0;    // what a step adds to the loaded process at its fullest
  int64_t evaluation_bytes = 0;  // what the evaluation adds, the step's leftovers included
  int64_t peak_bytes = 0;        // max(loading's peak, loaded + runtime + the larger of the two)
};

// The engine drops gradients at each step's start and frees a block's saved
// tensors as its backward runs, so a micro-batch's own pass is fullest in
// some block b's backward: the blocks before b still held, the gradients of
// the blocks after b made, and b's own peak on top. The other live
// micro-batches hold their activations and received inputs throughout, and
// at the end of a DDP backward every gradient is there with its bucket. The
// evaluation at an epoch's end runs with the last step's gradients and the
// optimizer's state still held; on a larger batch, it can be the fuller
// moment.
RankMemory predict_rank_memory(const RankMemoryInputs& in);

}  // namespace flotilla::predict
