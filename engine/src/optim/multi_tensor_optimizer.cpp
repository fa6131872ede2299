#include "optim/multi_tensor_optimizer.h"

#include <cmath>
#include <map>

namespace flotilla::optim {
namespace {

std::vector<torch::Tensor> pick(const std::vector<torch::Tensor>& all,
                                const std::vector<size_t>& indices) {
  std::vector<torch::Tensor> out;
  out.reserve(indices.size());
  for (size_t i : indices) out.push_back(all[i]);
  return out;
}

}  // namespace

StepPath fastest_step_path(OptimizerKind kind, const torch::Device& device) {
  if (device.is_cpu() && kind == OptimizerKind::sgd) return StepPath::per_parameter;
  return StepPath::foreach;
}

MultiTensorOptimizer::MultiTensorOptimizer(const OptimizerConfig& config,
                                           std::vector<torch::Tensor> params, StepPath path)
    : config_(config),
      path_(path),
      lr_(config.lr),
      params_(std::move(params)),
      momentum_(params_.size()),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      steps_(params_.size(), 0) {}

void MultiTensorOptimizer::step() {
  torch::NoGradGuard no_grad;
  std::vector<size_t> active;
  active.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined()) active.push_back(i);
  if (active.empty()) return;
  if (config_.name == OptimizerKind::adamw)
    adamw_step(active);
  else if (path_ == StepPath::per_parameter)
    sgd_step_per_parameter(active);
  else
    sgd_step(active);
}

// sgd_step's operations, one parameter at a time.
void MultiTensorOptimizer::sgd_step_per_parameter(const std::vector<size_t>& active) {
  for (size_t i : active) {
    auto& p = params_[i];
    auto d = p.grad();
    if (config_.weight_decay != 0) d = d.add(p, config_.weight_decay);
    if (config_.momentum != 0) {
      auto& buffer = momentum_[i];
      if (buffer.defined()) {
        buffer.mul_(config_.momentum);
        buffer.add_(d, 1.0);
      } else {
        buffer = d.clone().detach();
      }
      d = buffer;
    }
    p.add_(d, -lr_);
  }
}

// torch::optim::SGD: d = g + wd p; buf = d (first step) or buf m + d
// (dampening 0); p -= lr buf.
void MultiTensorOptimizer::sgd_step(const std::vector<size_t>& active) {
  auto params = pick(params_, active);
  std::vector<torch::Tensor> grads;
  grads.reserve(active.size());
  for (size_t i : active) grads.push_back(params_[i].grad());
  if (config_.weight_decay != 0)
    grads = at::_foreach_add(grads, params, config_.weight_decay);  // fresh: grads stay as they are
  if (config_.momentum == 0) {
    at::_foreach_add_(params, grads, -lr_);
    return;
  }
  std::vector<torch::Tensor> buffers;  // those that exist; the others start as a copy of d
  std::vector<torch::Tensor> updates;
  buffers.reserve(active.size());
  for (size_t k = 0; k < active.size(); ++k) {
    auto& buffer = momentum_[active[k]];
    if (buffer.defined()) {
      buffers.push_back(buffer);
      updates.push_back(grads[k]);
    } else {
      buffer = grads[k].clone().detach();
    }
  }
  if (!buffers.empty()) {
    at::_foreach_mul_(buffers, config_.momentum);
    at::_foreach_add_(buffers, updates, 1.0);
  }
  at::_foreach_add_(params, pick(momentum_, active), -lr_);
}

// torch::optim::AdamW (amsgrad off): p *= 1 - lr wd; m = b1 m + (1-b1) g;
// v = b2 v + (1-b2) g^2; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
// The bias corrections depend on each parameter's own step count, so
// parameters go in groups of equal count (one group unless freezing made
// some skip steps).
void MultiTensorOptimizer::adamw_step(const std::vector<size_t>& active) {
  std::map<int64_t, std::vector<size_t>> by_step;
  for (size_t i : active) {
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = torch::zeros_like(params_[i], torch::MemoryFormat::Preserve);
      exp_avg_sq_[i] = torch::zeros_like(params_[i], torch::MemoryFormat::Preserve);
    }
    by_step[++steps_[i]].push_back(i);
  }
  for (const auto& [step, group] : by_step) {
    auto params = pick(params_, group);
    auto exp_avg = pick(exp_avg_, group);
    auto exp_avg_sq = pick(exp_avg_sq_, group);
    std::vector<torch::Tensor> grads;
    grads.reserve(group.size());
    for (size_t i : group) grads.push_back(params_[i].grad());

    if (config_.weight_decay != 0) at::_foreach_mul_(params, 1 - lr_ * config_.weight_decay);
    const double bias_correction1 = 1 - std::pow(kAdamBeta1, static_cast<double>(step));
    const double bias_correction2 = 1 - std::pow(kAdamBeta2, static_cast<double>(step));

    at::_foreach_mul_(exp_avg, kAdamBeta1);
    at::_foreach_add_(exp_avg, grads, 1 - kAdamBeta1);
    at::_foreach_mul_(exp_avg_sq, kAdamBeta2);
    at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1 - kAdamBeta2);

    auto denom = at::_foreach_sqrt(exp_avg_sq);
    at::_foreach_div_(denom, std::sqrt(bias_correction2));
    at::_foreach_add_(denom, kAdamEps);
    at::_foreach_addcdiv_(params, exp_avg, denom, -lr_ / bias_correction1);
  }
}

void MultiTensorOptimizer::save(torch::serialize::OutputArchive& archive) const {
  for (const auto& [name, tensors] : named_buffers(*this))
    for (size_t i = 0; i < tensors->size(); ++i)
      if ((*tensors)[i].defined())
        archive.write("optimizer." + std::string(name) + "." + std::to_string(i), (*tensors)[i],
                      /*is_buffer=*/true);
  archive.write("optimizer.steps", torch::tensor(steps_, torch::kInt64), true);
}

void MultiTensorOptimizer::load(torch::serialize::InputArchive& archive) {
  for (const auto& [name, tensors] : named_buffers(*this))
    for (size_t i = 0; i < tensors->size(); ++i) {
      const std::string key = "optimizer." + std::string(name) + "." + std::to_string(i);
      torch::Tensor saved;
      if (!archive.try_read(key, saved, /*is_buffer=*/true)) {
        (*tensors)[i] = torch::Tensor();
        continue;
      }
      if (saved.sizes() != params_[i].sizes())
        throw std::runtime_error(key + " has shape " + c10::str(saved.sizes()) +
                                 ", its parameter " + c10::str(params_[i].sizes()));
      // The parameter's device and memory format, as the step made them.
      (*tensors)[i] = torch::empty_like(params_[i], torch::MemoryFormat::Preserve)
                          .to(saved.scalar_type())
                          .copy_(saved);
    }
  torch::Tensor steps;
  archive.read("optimizer.steps", steps, true);
  if (steps.numel() != static_cast<int64_t>(steps_.size()))
    throw std::runtime_error("optimizer.steps holds " + std::to_string(steps.numel()) +
                             " counts for " + std::to_string(steps_.size()) + " parameters");
  for (size_t i = 0; i < steps_.size(); ++i)
    steps_[i] = steps[static_cast<int64_t>(i)].item<int64_t>();
}

std::vector<std::string> MultiTensorOptimizer::buffer_names() const {
  if (config_.name == OptimizerKind::adamw) return {"exp_avg", "exp_avg_sq"};
  if (config_.momentum != 0) return {"momentum"};
  return {};
}

size_t MultiTensorOptimizer::index_of(const torch::Tensor& param) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].is_same(param)) return i;
  throw std::invalid_argument("the optimizer does not hold that parameter");
}

MultiTensorOptimizer::ParameterState MultiTensorOptimizer::state_of(
    const torch::Tensor& param) const {
  const size_t i = index_of(param);
  ParameterState state;
  state.steps = steps_[i];
  for (const auto& name : buffer_names())
    for (const auto& [buffer_name, tensors] : named_buffers(*this))
      if (name == buffer_name) state.buffers.push_back((*tensors)[i]);
  return state;
}

void MultiTensorOptimizer::set_state(const torch::Tensor& param, ParameterState state) {
  const size_t i = index_of(param);
  const auto names = buffer_names();
  if (state.buffers.size() != names.size())
    throw std::invalid_argument("a parameter's state holds " +
                                std::to_string(state.buffers.size()) + " buffers, the optimizer " +
                                std::to_string(names.size()));
  steps_[i] = state.steps;
  for (size_t k = 0; k < names.size(); ++k)
    for (const auto& [buffer_name, tensors] : named_buffers(*this))
      if (names[k] == buffer_name) (*tensors)[i] = state.buffers[k];
}

}  // namespace flotilla::optim
