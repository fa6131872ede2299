#pragma once
// DataParallel: one process drives a copy of the model on each of several
// devices, as PyTorch's nn.DataParallel does. The batch is scattered along
// its first dimension, each replica runs forward and backward on its part,
// the gradients are summed into the first replica (whose parameters the
// optimizer steps), and its parameters and buffers are copied back out.
//
// Replicas are kept between steps rather than re-made every forward: the
// engine's blocks are not Cloneable, and the copy after the step moves the
// same bytes that DataParallel's replicate() moves before the next one.

#include <torch/torch.h>

#include <functional>
#include <vector>

namespace flotilla {

class DataParallel {
 public:
  // `build` makes one copy of the model (called once per device, with the
  // same seed, so that the copies start equal); replica 0 is on devices[0].
  DataParallel(const std::function<torch::nn::Sequential()>& build,
               std::vector<torch::Device> devices);

  torch::nn::Sequential& primary() { return replicas_.front(); }
  size_t size() const { return replicas_.size(); }

  struct Output {
    torch::Tensor loss;     // the batch's mean loss, on devices[0]
    torch::Tensor correct;  // int64 hits, on devices[0]
  };
  // Every replica's forward on its share of the batch (scattered along dim 0).
  Output forward(const torch::Tensor& inputs, const torch::Tensor& targets);
  // Every replica's backward of what forward() computed, its loss times
  // `loss_scale` (fp16's dynamic scale).
  void backward(double loss_scale = 1.0);
  // Every replica's gradients summed into the primary's.
  void reduce_gradients();
  // After the optimizer stepped the primary: its parameters and buffers to the others.
  void broadcast_primary();

 private:
  std::vector<torch::nn::Sequential> replicas_;
  std::vector<torch::Device> devices_;
  std::vector<torch::Tensor> losses_;  // each replica's weighted loss, until backward()
};

}  // namespace flotilla
