#include "plan/core_sharing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace flotilla {
namespace {

using Clock = std::chrono::steady_clock;

// Holds each worker until all have arrived, as often as it is called.
class StartLine {
 public:
  explicit StartLine(int64_t workers) : workers_(workers) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t round = round_;
    if (++arrived_ == workers_) {
      arrived_ = 0;
      ++round_;
      all_here_.notify_all();
    } else {
      all_here_.wait(lock, [&] { return round_ != round; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_here_;
  int64_t workers_, arrived_ = 0, round_ = 0;
};

// The wall time of one pass while `at_once` workers run `passes` each,
// started together after an untimed one each (allocations, oneDNN's
// primitives, the thread's pool): from the start to the last worker's end,
// over the passes. Time-slicing and shared caches both show in it.
double pass_ms_at_once(torch::nn::Sequential& model, const torch::Tensor& example, int64_t at_once,
                       int64_t passes) {
  const int threads = torch::get_num_threads();
  std::vector<torch::Tensor> parameters;
  for (auto& p : model->parameters())
    if (p.requires_grad()) parameters.push_back(p);
  const auto pass = [&] {
    const auto loss = model->forward(example).to(torch::kFloat32).sum();
    // Gradients returned, not accumulated: the workers share the parameters.
    if (!parameters.empty()) torch::autograd::grad({loss}, parameters);
  };
  StartLine start_line(at_once + 1);
  std::vector<std::thread> workers;
  for (int64_t w = 0; w < at_once; ++w)
    workers.emplace_back([&] {
      torch::set_num_threads(threads);  // a new thread's pool size, as the rank's
      pass();
      start_line.arrive_and_wait();
      for (int64_t p = 0; p < passes; ++p) pass();
    });
  start_line.arrive_and_wait();
  const auto started = Clock::now();
  for (auto& worker : workers) worker.join();
  return std::chrono::duration<double, std::milli>(Clock::now() - started).count() /
         static_cast<double>(passes);
}

}  // namespace

std::vector<double> measure_core_sharing(torch::nn::Sequential& model, const torch::Tensor& example,
                                         int64_t max_at_once) {
  std::vector<double> slowdown{1.0};
  if (max_at_once <= 1) return slowdown;
  const bool was_training = model->is_training();
  model->train();
  std::vector<torch::Tensor> buffers_before;
  {
    torch::NoGradGuard no_grad;
    for (const auto& b : model->buffers()) buffers_before.push_back(b.clone());
  }
  // Enough passes for a quarter second alone, so that a short pass is not
  // lost in the threads' start and the scheduler's slices.
  const double first = pass_ms_at_once(model, example, 1, 2);
  const auto passes =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(250.0 / std::max(first, 0.01))), 3, 200);
  const double alone = pass_ms_at_once(model, example, 1, passes);
  for (int64_t n = 2; n <= max_at_once; ++n)
    slowdown.push_back(alone > 0 ? pass_ms_at_once(model, example, n, passes) / alone : 1.0);
  {
    torch::NoGradGuard no_grad;
    auto buffers = model->buffers();
    for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(buffers_before[i]);
  }
  if (!was_training) model->eval();
  return slowdown;
}

}  // namespace flotilla
