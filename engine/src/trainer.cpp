#include "trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <torch/csrc/utils/tensor_flatten.h>

#include "models/model_factory.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& o,
                                                        std::vector<torch::Tensor> params) {
  if (o.name == OptimizerKind::adamw)
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  return std::make_unique<torch::optim::SGD>(
      params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
}

// FLOTILLA_FAULT="RANK:STEP" makes that rank throw at that step: how the
// tests make a rank fail for real, mid-run, in a multi-process run.
std::optional<std::pair<int64_t, int64_t>> injected_fault() {
  const char* text = std::getenv("FLOTILLA_FAULT");
  long long rank = 0, step = 0;
  if (text && std::sscanf(text, "%lld:%lld", &rank, &step) == 2) return std::make_pair(rank, step);
  return std::nullopt;
}

}  // namespace

Trainer::Trainer(const TrainOptions& options)
    : options_(options),
      config_(options.config),
      device_(config_.device == DeviceKind::cuda
                  ? torch::Device(torch::kCUDA, options.env.local_rank)
                  : torch::Device(torch::kCPU)) {
  if (config_.threads > 0) torch::set_num_threads(static_cast<int>(config_.threads));
  torch::manual_seed(config_.seed);
  fault_ = injected_fault();
  dataset_ = data::load_dataset(config_);
  model_ = build_model(config_, dataset_.shape);
  model_->to(device_);
  if (options.env.world_size > 1) {
    comm_ = Communicator::connect(options.env, device_.is_cuda(), std::chrono::minutes(5));
    // Every replica starts from rank 0's parameters and buffers, as DDP does.
    auto state = model_->parameters();
    for (const auto& b : model_->buffers()) state.push_back(b);
    torch::NoGradGuard no_grad;
    comm_->broadcast(state, 0);
    comm_->take_stats();
    std::vector<torch::Tensor> trainable;
    for (const auto& p : model_->parameters())
      if (p.requires_grad()) trainable.push_back(p);
    buckets_ = std::make_unique<GradientBuckets>(
        trainable, *comm_, static_cast<int64_t>(config_.bucket_mb * 1024 * 1024));
  }
  optimizer_ = make_optimizer(config_.optimizer, model_->parameters());

  data::LoaderOptions train{
      config_.batch_size, options.env.rank, options.env.world_size, config_.seed, true,
      dataset_.augment};
  data::LoaderOptions test{std::max<int64_t>(config_.batch_size, 500),
                           options.env.rank,
                           options.env.world_size,
                           config_.seed,
                           false,
                           false};
  train_loader_ =
      std::make_unique<data::BatchLoader>(dataset_.train, dataset_.normalization, train);
  test_loader_ = std::make_unique<data::BatchLoader>(dataset_.test, dataset_.normalization, test);
  timer_ = make_phase_timer(device_.is_cuda());

  total_steps_ = config_.epochs * train_loader_->batches_per_epoch();
  if (config_.max_steps > 0) total_steps_ = std::min(total_steps_, config_.max_steps);
  result_.parameters = parameter_count(*model_);

  records::Start start;
  start.rank = options.env.rank;
  start.world_size = options.env.world_size;
  start.model = name_of(config_.model);
  start.dataset = name_of(config_.dataset);
  start.device = device_.str();
  start.parameters = result_.parameters;
  start.trainable_parameters = parameter_count(*model_, true);
  start.blocks = static_cast<int64_t>(model_->size());
  start.steps_per_epoch = train_loader_->batches_per_epoch();
  start.threads = torch::get_num_threads();
  start.torch_version = torch_version();
  emit(records::to_line(start));
}

void Trainer::emit(const std::string& line) {
  if (options_.sink) options_.sink->write(line);
}

bool Trainer::done() const {
  return global_step_ >= total_steps_;
}

double Trainer::learning_rate(int64_t epoch) const {
  const auto& s = config_.lr_schedule;
  const double base = config_.optimizer.lr;
  if (global_step_ < s.warmup_steps) return base * (global_step_ + 1) / s.warmup_steps;
  switch (s.name) {
    case LrScheduleKind::constant:
      return base;
    case LrScheduleKind::step:
      return base * std::pow(s.gamma, static_cast<double>(epoch / s.step_epochs));
    case LrScheduleKind::cosine: {
      const double span = std::max<int64_t>(1, total_steps_ - s.warmup_steps);
      const double t = static_cast<double>(global_step_ - s.warmup_steps) / span;
      return base * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t)));
    }
  }
  return base;
}

TrainResult Trainer::run() {
  const auto started = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < config_.epochs && !done(); ++epoch) {
    const auto epoch_started = std::chrono::steady_clock::now();
    train_epoch(epoch);
    records::Epoch record;
    record.rank = options_.env.rank;
    record.epoch = epoch;
    record.steps = global_step_;
    record.loss = epoch_loss_count_ ? epoch_loss_sum_ / epoch_loss_count_ : 0.0;
    record.acc_train = fraction_over_ranks(epoch_correct_, epoch_samples_);
    // Epoch time is training only; evaluation is timed apart, as the seeds report it.
    record.epoch_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_started).count();
    record.samples_per_s = epoch_samples_ * options_.env.world_size / record.epoch_s;
    record.acc_test = evaluate();
    emit(records::to_line(record));
    result_.epochs = epoch + 1;
    result_.acc_train = record.acc_train;
    result_.acc_test = record.acc_test;
  }
  result_.steps = global_step_;
  result_.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (measured_steps_ > 0) {
    const double n = static_cast<double>(measured_steps_);
    result_.data_ms = totals_[Phase::data] / n;
    result_.forward_ms = totals_[Phase::forward] / n;
    result_.backward_ms = totals_[Phase::backward] / n;
    result_.comm_ms = totals_[Phase::comm] / n;
    result_.optimizer_ms = totals_[Phase::optimizer] / n;
    result_.step_ms = totals_.step_ms / n;
    result_.samples_per_s = measured_samples_ / (totals_.step_ms / 1000.0);
  }
  return result_;
}

void Trainer::train_epoch(int64_t epoch) {
  model_->train();
  epoch_correct_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  epoch_samples_ = 0;
  epoch_loss_sum_ = 0;
  epoch_loss_count_ = 0;
  train_loader_->start_epoch(epoch);
  const int64_t batches = train_loader_->batches_per_epoch();
  for (int64_t i = 0; i < batches && !done(); ++i) {
    // The step starts before the batch is asked for: waiting for it is data time.
    if (options_.measure) timer_->begin_step();
    auto batch = train_loader_->next();
    if (!batch) throw std::logic_error("the loader ended its epoch early");
    step(std::move(*batch), epoch);
  }
  // The last step's times are known only now.
  if (pending_) {
    if (auto times = timer_->take_last()) finish_step(*pending_, *times);
    pending_.reset();
  }
}

void Trainer::step(data::Batch batch, int64_t epoch) {
  const bool measure = options_.measure;
  const double lr = learning_rate(epoch);
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);

  auto inputs = batch.inputs.to(device_, /*non_blocking=*/true);
  auto targets = batch.targets.to(device_, /*non_blocking=*/true);
  if (measure) timer_->end_phase(Phase::data);

  auto logits = model_->forward(inputs);
  auto loss = torch::nn::functional::cross_entropy(logits, targets);
  {
    torch::NoGradGuard no_grad;
    epoch_correct_ += logits.argmax(1).eq(targets).sum();
  }
  if (measure) timer_->end_phase(Phase::forward);

  loss.backward();
  if (measure) timer_->end_phase(Phase::backward);

  if (buckets_) {
    // Most buckets are in flight or done by now; this is the exposed wait.
    buckets_->finish();
    if (measure) timer_->end_phase(Phase::comm);
  }
  if (fault_ && fault_->first == options_.env.rank && fault_->second == global_step_ + 1)
    throw std::runtime_error("injected fault at step " + std::to_string(global_step_ + 1) +
                             " on rank " + std::to_string(options_.env.rank));

  optimizer_->step();
  // Gradients are dropped rather than zeroed, as PyTorch 2's zero_grad() does:
  // backward then writes them fresh instead of adding to zeros.
  for (auto& p : model_->parameters()) p.mutable_grad().reset();
  if (measure) timer_->end_phase(Phase::optimizer);

  ++global_step_;
  const int64_t samples = inputs.size(0);
  epoch_samples_ += samples;
  if (!measure) return;
  timer_->end_step();
  if (pending_) {
    if (auto times = timer_->take_previous()) finish_step(*pending_, *times);
  }
  PendingStep next;
  next.record.rank = options_.env.rank;
  next.record.epoch = epoch;
  next.record.step = global_step_;
  next.record.samples = samples * options_.env.world_size;
  next.record.lr = lr;
  next.loss = loss.detach();
  if (comm_) next.comm = comm_->take_stats();
  pending_ = std::move(next);
}

void Trainer::finish_step(PendingStep& pending, const PhaseTimes& times) {
  auto& r = pending.record;
  r.loss = pending.loss.item<double>();
  r.data_ms = times[Phase::data];
  r.forward_ms = times[Phase::forward];
  r.backward_ms = times[Phase::backward];
  r.comm_ms = times[Phase::comm];
  r.optimizer_ms = times[Phase::optimizer];
  r.step_ms = times.step_ms;
  r.samples_per_s = r.step_ms > 0 ? r.samples / (r.step_ms / 1000.0) : 0.0;
  const auto& c = pending.comm;
  r.comm_busy_ms = c.busy_ms;
  r.bytes_sent = c.bytes_sent;
  r.bytes_recv = c.bytes_recv;
  r.comm_per_s = r.step_ms > 0 ? c.operations / (r.step_ms / 1000.0) : 0.0;
  if (c.allreduce_ms > 0) {
    // nccl-tests: algbw = payload / time; busbw = algbw x 2(P-1)/P for all-reduce.
    const double p = static_cast<double>(options_.env.world_size);
    r.algbw_gbps = c.allreduce_bytes / 1e9 / (c.allreduce_ms / 1000.0);
    r.busbw_gbps = r.algbw_gbps * 2.0 * (p - 1.0) / p;
  }
  const auto memory = memory_stats(device_.is_cuda(), device_.is_cuda() ? device_.index() : 0);
  r.mem_alloc = memory.allocated;
  r.mem_reserved = memory.reserved;
  r.mem_peak = memory.peak;
  epoch_loss_sum_ += r.loss;
  ++epoch_loss_count_;
  if (r.step > 1) {
    for (size_t i = 0; i < totals_.ms.size(); ++i) totals_.ms[i] += times.ms[i];
    totals_.step_ms += times.step_ms;
    ++measured_steps_;
    measured_samples_ += r.samples;
  }
  emit(records::to_line(r));
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  auto correct = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  int64_t seen = 0;
  test_loader_->start_epoch(0);
  while (auto batch = test_loader_->next()) {
    auto logits = model_->forward(batch->inputs.to(device_));
    correct += logits.argmax(1).eq(batch->targets.to(device_)).sum();
    seen += batch->targets.size(0);
  }
  model_->train();
  return fraction_over_ranks(correct, seen);
}

double Trainer::fraction_over_ranks(const torch::Tensor& hits, int64_t count) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  auto counts = torch::stack({hits.to(torch::kFloat64), torch::full({}, double(count), options)});
  if (comm_) {
    std::vector<torch::Tensor> tensors{counts};
    comm_->allreduce_sum(tensors);
    comm_->take_stats();  // bookkeeping traffic is not a training step's
  }
  const double total = counts[1].item<double>();
  return total > 0 ? counts[0].item<double>() / total : 0.0;
}

}  // namespace flotilla
