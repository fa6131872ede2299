#pragma once
// Ranks that run on one machine's CPU share its cores, its caches and its
// memory bandwidth: on a 2-core machine two single-threaded ranks each
// train slower than one alone, three slower still (docs/predict.md). The
// prediction measures that slowdown on this machine, as it measures the
// blocks, and replays the step with it.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace flotilla {

// How much longer one pass (the model's forward and backward on `example`)
// takes while n of them run at once, each on its own thread with this
// process's intra-op threads as a rank would have, than alone: element n-1
// for n = 1..max_at_once (the first is 1). Each worker runs a quarter
// second's passes (as timed alone) after an untimed one; the time is from
// their common start to the last one's end. The model's buffers (batch
// norm's running statistics) are left as they were.
std::vector<double> measure_core_sharing(torch::nn::Sequential& model, const torch::Tensor& example,
                                         int64_t max_at_once);
// predict::sharing_slowdown (step_prediction.h) reads them for any n.

}  // namespace flotilla
