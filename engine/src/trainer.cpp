#include "trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <torch/csrc/utils/tensor_flatten.h>

#include "codec/activation_codec.h"
#include "flotilla/protocol/nic_counters.h"
#include "flotilla/protocol/rank_placement.h"
#include "flotilla/protocol/run_metrics.h"
#include "models/layers.h"
#include "models/model_factory.h"
#include "pipeline/partition.h"
#include "pipeline/stage_setup.h"
#include "runtime/thread_pools.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

// FLOTILLA_FAULT="RANK:STEP" makes that rank throw at that step: how the
// tests make a rank fail for real, mid-run, in a multi-process run.
std::optional<std::pair<int64_t, int64_t>> injected_fault() {
  const char* text = std::getenv("FLOTILLA_FAULT");
  long long rank = 0, step = 0;
  if (text && std::sscanf(text, "%lld:%lld", &rank, &step) == 2) return std::make_pair(rank, step);
  return std::nullopt;
}

// FLOTILLA_FAULT="RANK:transition" kills that rank with SIGKILL, as a lost
// node would, in the middle of an elastic transition.
std::optional<int64_t> injected_transition_kill() {
  const char* text = std::getenv("FLOTILLA_FAULT");
  long long rank = 0;
  char what[16] = {};
  if (text && std::sscanf(text, "%lld:%15s", &rank, what) == 2 &&
      std::string_view(what) == "transition")
    return rank;
  return std::nullopt;
}

}  // namespace

Trainer::Trainer(const TrainOptions& options)
    : options_(options),
      config_(options.config),
      device_(config_.device == DeviceKind::cuda
                  ? torch::Device(torch::kCUDA, options.env.local_rank)
                  : torch::Device(torch::kCPU)),
      compute_dtype_(compute_dtype(config_.precision)),
      gradient_dtype_(torch::kFloat32),
      scaler_(config_.precision == Precision::fp16) {
  // On the CPU the agent caps the rank's data segment before it starts; on a
  // GPU the cap is the caching allocator's, set before the first allocation.
  if (device_.is_cuda() && config_.limits.memory_mb > 0)
    limit_cuda_memory(device_.index(), config_.limits.memory_mb << 20);
  // Every rank builds the whole model from the same seed: a pipeline stage
  // keeps its blocks of it, exactly as the unpipelined model has them.
  torch::manual_seed(config_.seed);
  fault_ = injected_fault();
  dataset_ = data::load_dataset(config_);
  auto full_model = build_model(config_, dataset_.shape);
  full_model->to(device_);
  if (config_.channels_last) to_channels_last(*full_model);
  total_blocks_ = static_cast<int64_t>(full_model->size());
  full_model_ = full_model;

  const auto& env = options.env;
  // train() checked that the environment's world is the config's.
  const auto layout = run_layout(config_);
  const bool pipelined = layout.pipelined;
  // ddp on one rank still goes through a process group: NCCL's one-rank path.
  if (env.world_size > 1 || config_.strategy == Strategy::ddp)
    comm_ = Communicator::connect(env, device_.is_cuda(), std::chrono::minutes(5));
  const int64_t stages = layout.stages;
  replicas_ = layout.replicas;
  const int64_t replica = place_rank(config_, env.rank).replica;

  const auto train = data::training_loader_options(config_, replica, replicas_, dataset_.augment);
  const auto test = data::evaluation_loader_options(config_, replica, replicas_);
  train_loader_ =
      std::make_unique<data::BatchLoader>(dataset_.train, dataset_.normalization, train);
  test_loader_ = std::make_unique<data::BatchLoader>(dataset_.test, dataset_.normalization, test);

  if (pipelined) {
    set_up_pipeline(full_model, stages);
  } else if (config_.strategy == Strategy::dp) {
    const int64_t visible = visible_cuda_devices();
    if (config_.devices > visible)
      throw std::runtime_error("devices: " + std::to_string(config_.devices) +
                               " GPUs asked for, this node has " + std::to_string(visible) +
                               " visible");
    std::vector<torch::Device> devices;
    for (int64_t d = 0; d < (config_.devices > 0 ? config_.devices : visible); ++d)
      devices.emplace_back(torch::kCUDA, d);
    data_parallel_ = std::make_unique<DataParallel>(
        [&] {
          torch::manual_seed(config_.seed);
          auto replica = build_model(config_, dataset_.shape);
          if (config_.channels_last) to_channels_last(*replica);
          return replica;
        },
        devices);
    model_ = full_model = data_parallel_->primary();
  } else {
    model_ = full_model;
    if (comm_) {
      // Every replica starts from rank 0's parameters and buffers, as DDP does.
      broadcast_state(*comm_);
      gradient_comm_ = comm_.get();
    }
  }
  freezer_ = std::make_unique<Freezer>(config_.freeze, total_blocks_);
  if (config_.elastic.cache && first_block_ == 0)
    prefix_cache_ = std::make_unique<PrefixCache>(
        dataset_.train.size(), config_.elastic.cache_mb << 20,
        options.scratch_folder.empty() ? std::filesystem::temp_directory_path()
                                       : options.scratch_folder);
  if (gradient_comm_) gradient_dtype_ = gradient_wire_dtype(config_.precision, device_.is_cuda());
  rebuild_buckets();
  optimizer_ = std::make_unique<optim::MultiTensorOptimizer>(
      config_.optimizer, model_->parameters(),
      optim::fastest_step_path(config_.optimizer.name, device_));
  timer_ = make_phase_timer(device_.is_cuda());

  total_steps_ = config_.epochs * train_loader_->batches_per_epoch();
  if (config_.max_steps > 0) total_steps_ = std::min(total_steps_, config_.max_steps);
  result_.parameters = parameter_count(*full_model);

  if (config_.save.enabled() || options.resume) {
    std::filesystem::path root = config_.save.dir;
    if (root.is_relative())
      root = (options.scratch_folder.empty() ? std::filesystem::current_path()
                                             : options.scratch_folder) /
             root;
    checkpoints_ = std::make_unique<checkpoint::CheckpointFolder>(root, env.rank);
  }
  if (options.resume) {
    if (const int64_t step = newest_common_checkpoint(); step > 0) restore_checkpoint(step);
  }
  last_save_ = std::chrono::steady_clock::now();

  records::Start start;
  start.rank = env.rank;
  start.world_size = env.world_size;
  start.model = name_of(config_.model);
  start.dataset = name_of(config_.dataset);
  start.device = device_.str();
  start.parameters = result_.parameters;
  start.trainable_parameters = parameter_count(*full_model, true);
  start.blocks = total_blocks_;
  for (auto it = full_model->begin(); it != full_model->end(); ++it)
    start.block_parameters.push_back(parameter_count(*it->ptr()));
  if (pipeline_) start.balance = pipeline_->plan().balance;
  start.steps_per_epoch = train_loader_->batches_per_epoch();
  start.threads = result_.threads = torch::get_num_threads();
  start.blas = result_.blas = blas_info().name;
  start.blas_threads = result_.blas_threads = blas_threads();
  start.torch_version = torch_version();
  start.engine = engine_program();
  start.machine = machine_boot_id();
  start.cores = usable_cores();
  start.precision = name_of(config_.precision);
  if (gradient_comm_) start.gradient_dtype = dtype_name(gradient_dtype_);
  if (pipeline_) start.boundary_dtype = dtype_name(compute_dtype_);
  start.resumed_from_step = resumed_from_;
  emit(records::to_line(start));
}

void Trainer::broadcast_state(Communicator& group) {
  auto state = model_->parameters();
  for (const auto& b : model_->buffers()) state.push_back(b);
  torch::NoGradGuard no_grad;
  Communicator::Uncounted setup(group);
  // Collectives take row-major tensors: channels_last weights go as copies.
  std::vector<torch::Tensor> sent;
  for (const auto& t : state) sent.push_back(t.is_contiguous() ? t : t.contiguous());
  group.broadcast(sent, 0);
  for (size_t i = 0; i < state.size(); ++i)
    if (!sent[i].is_same(state[i])) state[i].copy_(sent[i]);
}

torch::Tensor Trainer::model_input(const torch::Tensor& inputs) const {
  return config_.channels_last ? to_channels_last(inputs) : inputs;
}

bool Trainer::unscale_gradients() {
  if (!scaler_.enabled()) return true;
  std::function<bool(bool)> agree;
  if (comm_) {
    // Every rank skips a step together: a pipeline's stages hold different
    // gradients, and a replica that stepped alone would leave the others.
    agree = [this](bool finite) {
      std::vector<torch::Tensor> flag{
          torch::full({}, finite ? 0.0 : 1.0, torch::TensorOptions().device(device_))};
      Communicator::Uncounted bookkeeping(*comm_);
      comm_->allreduce_sum(flag);
      return flag[0].item<double>() == 0.0;
    };
  }
  return scaler_.unscale(model_->parameters(), agree);
}

void Trainer::set_up_pipeline(torch::nn::Sequential full_model, int64_t stages) {
  const auto& env = options_.env;
  const auto place = place_rank(config_, env.rank);
  PipelinePlan plan;
  plan.stages = stages;
  plan.stage = place.stage;
  plan.replica = place.replica;
  plan.schedule = config_.schedule;
  plan.chunks = config_.chunks;
  plan.checkpoint = config_.checkpoint;
  plan.compute_dtype = compute_dtype_;
  // Real samples show the shapes that cross each boundary and what each block costs.
  test_loader_->start_epoch(0);
  auto sample = test_loader_->next();
  if (!sample) throw std::runtime_error("the test split is empty: no sample to plan the pipeline");
  const auto inputs = sample->inputs.to(device_);
  if (config_.elastic.pipe) {
    // AutoPipe weighs blocks by the same measurement the cut is made by.
    elastic_.emplace();
    elastic_->costs = shared_block_costs(full_model, measuring_example(inputs, config_), *comm_);
    plan.balance = config_.balance;
    if (plan.balance.empty())
      plan.balance = balance_by_cost(costs_with_frozen(elastic_->costs, 0), stages);
    elastic_->budget_ms = slowest_stage(costs_with_frozen(elastic_->costs, 0), plan.balance);
    elastic_->layout = {stages, replicas_, plan.balance};
    elastic_->started_replicas = replicas_;
    elastic_->shape_example = shape_example(inputs);
    elastic_->killed_rank = injected_transition_kill();
  } else {
    plan.balance = resolve_balance(config_.balance, stages, full_model,
                                   measuring_example(inputs, config_), *comm_);
  }
  plan.boundary_shapes = boundary_shapes(full_model, shape_example(inputs), plan.balance);
  model_ = stage_blocks(full_model, plan.balance, plan.stage);
  first_block_ = plan.first_block();
  if (config_.replicas > 1) {
    std::vector<int64_t> peers;
    for (int64_t r = 0; r < config_.replicas; ++r) peers.push_back(r * stages + plan.stage);
    replica_comm_ = comm_->subgroup("stage" + std::to_string(plan.stage), peers);
    broadcast_state(*replica_comm_);
    gradient_comm_ = replica_comm_.get();
  }
  pipeline_ =
      std::make_unique<Pipeline>(plan, model_, device_, *comm_, make_codec(config_.compression));
}

void Trainer::rebuild_buckets() {
  // Hooks of the old buckets go before new ones are placed.
  buckets_.reset();
  if (!gradient_comm_) return;
  std::vector<torch::Tensor> trainable;
  for (const auto& p : model_->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  if (trainable.empty()) return;  // a wholly frozen stage averages nothing
  buckets_ = std::make_unique<GradientBuckets>(
      trainable, *gradient_comm_, static_cast<int64_t>(config_.bucket_mb * 1024 * 1024),
      gradient_dtype_);
}

void Trainer::apply_freezing(int64_t frozen) {
  if (frozen <= frozen_applied_) return;
  frozen_applied_ = frozen;
  place_frozen_prefix();
  rebuild_buckets();
}

void Trainer::place_frozen_prefix() {
  const int64_t frozen = frozen_applied_;
  freeze_leading_blocks(model_, first_block_, frozen);
  if (pipeline_) pipeline_->set_frozen_blocks(frozen);
  if (prefix_cache_) {
    // This rank's frozen blocks; never the whole model, whose last block
    // never freezes, but possibly a whole first pipeline stage.
    const int64_t cached = std::min<int64_t>(frozen, static_cast<int64_t>(model_->size()));
    prefix_cache_->set_blocks(cached);
    if (pipeline_) pipeline_->set_leading_blocks_done(cached);
    set_training_mode();
  }
}

void Trainer::set_training_mode() {
  model_->train();
  if (!prefix_cache_) return;
  for (int64_t b = 0; b < prefix_cache_->blocks(); ++b) (model_->begin() + b)->ptr()->eval();
}

torch::Tensor Trainer::through_cached_prefix(const torch::Tensor& inputs,
                                             const torch::Tensor& indices) {
  if (auto cached = prefix_cache_->lookup(indices)) {
    cached_samples_ = indices.size(0);
    return cached->to(device_, /*non_blocking=*/true);
  }
  torch::NoGradGuard no_grad;
  torch::Tensor outputs;
  {
    AutocastScope autocast(device_.is_cuda(), compute_dtype_);
    outputs = models::forward_blocks(model_, 0, prefix_cache_->blocks(), inputs);
  }
  prefix_cache_->store(indices, outputs);
  return outputs;
}

void Trainer::observe_gradients() {
  // Row 0: squared gradient norm of each block of the whole model; row 1: how
  // many ranks hold that block with trainable parameters (replicas hold copies).
  auto sums = torch::zeros({2, total_blocks_}, torch::TensorOptions().dtype(torch::kFloat64));
  for (int64_t b = 0; b < static_cast<int64_t>(model_->size()); ++b) {
    double squared = 0;
    bool trainable = false;
    for (const auto& p : (model_->begin() + b)->ptr()->parameters()) {
      if (!p.requires_grad()) continue;
      trainable = true;
      if (p.grad().defined()) squared += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
    }
    sums[0][first_block_ + b] = squared;
    sums[1][first_block_ + b] = trainable ? 1.0 : 0.0;
  }
  if (comm_) {
    std::vector<torch::Tensor> message{sums.to(device_)};
    Communicator::Uncounted bookkeeping(*comm_);
    comm_->allreduce_sum(message);
    sums = message[0].cpu();
  }
  std::vector<double> norms(total_blocks_);
  for (int64_t b = 0; b < total_blocks_; ++b) {
    const double holders = sums[1][b].item<double>();
    norms[b] = holders > 0 ? std::sqrt(sums[0][b].item<double>() / holders) : -1.0;
  }
  freezer_->observe(norms);
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
  for (int64_t epoch = start_epoch_; epoch < config_.epochs && !done(); ++epoch) {
    const auto epoch_started = std::chrono::steady_clock::now();
    // The node's counters around the training alone: set-up's broadcast and
    // the evaluation stay out, as they did of the seed's per-epoch readings.
    const auto nic_before = protocol::external_nic_bytes(protocol::read_nic_bytes());
    const bool saves_at_end = train_epoch(epoch, epoch == start_epoch_ ? start_batch_ : 0);
    const auto nic_after = protocol::external_nic_bytes(protocol::read_nic_bytes());
    records::Epoch record;
    record.nic_rx_bytes = static_cast<int64_t>(nic_after.rx - nic_before.rx);
    record.nic_tx_bytes = static_cast<int64_t>(nic_after.tx - nic_before.tx);
    record.rank = options_.env.rank;
    record.epoch = epoch;
    record.steps = global_step_;
    // Loss and accuracy over every rank that computes them.
    record.loss = fraction_over_ranks(torch::full({}, epoch_loss_sum_, torch::kFloat64),
                                      static_cast<double>(epoch_loss_count_));
    record.acc_train =
        fraction_over_ranks(epoch_correct_, static_cast<double>(epoch_scored_samples_));
    // Epoch time is training only; evaluation is timed apart, as the seeds report it.
    record.epoch_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_started).count();
    record.samples_per_s = static_cast<double>(epoch_global_samples_) / record.epoch_s;
    record.acc_test = evaluate();
    emit(records::to_line(record));
    result_.epochs = epoch + 1;
    result_.acc_train = record.acc_train;
    result_.acc_test = record.acc_test;
    // Due at the epoch's last batch: saved past its record, to go on with the next epoch.
    if (saves_at_end) save_checkpoint(epoch + 1, 0);
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
  }
  result_.samples_per_s = metrics::throughput(step_work_).value_or(0.0);
  return result_;
}

bool Trainer::train_epoch(int64_t epoch, int64_t first_batch) {
  set_training_mode();
  // A resumed epoch keeps the sums its checkpoint brought back.
  if (first_batch == 0) {
    epoch_correct_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
    epoch_samples_ = 0;
    epoch_scored_samples_ = 0;
    epoch_global_samples_ = 0;
    epoch_loss_sum_ = 0;
    epoch_loss_count_ = 0;
  }
  train_loader_->start_epoch(epoch, first_batch);
  bool saves_at_end = false;
  // An elastic transition re-splits the batch over other replicas: the epoch
  // keeps its batches, as the loader then counts them.
  for (int64_t i = first_batch; i < train_loader_->batches_per_epoch() && !done(); ++i) {
    if (freezer_->enabled()) {
      apply_freezing(freezer_->frozen_at(global_step_ + 1));
      if (elastic_) consider_transition(epoch, i);
    }
    // The step starts before the batch is asked for: waiting for it is data time.
    step_started_ = std::chrono::steady_clock::now();
    if (options_.measure) timer_->begin_step();
    auto batch = train_loader_->next();
    if (!batch) throw std::logic_error("the loader ended its epoch early");
    step(std::move(*batch), epoch);
    if (checkpoint_due()) {
      if (i + 1 < train_loader_->batches_per_epoch())
        save_checkpoint(epoch, i + 1);
      else
        saves_at_end = true;
    }
  }
  // The last step's times are known only now; its wall time ends here, before evaluation.
  finish_pending_step();
  return saves_at_end;
}

void Trainer::finish_pending_step() {
  if (!pending_) return;
  pending_->wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                pending_->started)
                          .count();
  if (auto times = timer_->take_last()) finish_step(*pending_, *times);
  pending_.reset();
}

void Trainer::step(data::Batch batch, int64_t epoch) {
  const bool measure = options_.measure;
  PhaseTimer* timer = measure ? timer_.get() : nullptr;
  const int64_t frozen = frozen_applied_;
  const double lr = learning_rate(epoch);
  optimizer_->set_lr(lr);

  const int64_t samples = batch.targets.size(0);
  const double loss_scale = scaler_.scale();
  const bool cuda = device_.is_cuda();
  batch.inputs = model_input(batch.inputs);
  cached_samples_ = 0;
  const bool cache = prefix_cache_ && prefix_cache_->blocks() > 0;
  torch::Tensor loss;
  if (pipeline_) {
    // The first stage hands the pipeline its cached blocks' output, which it
    // takes as the input of its first block not yet done.
    if (cache) batch.inputs = through_cached_prefix(batch.inputs.to(device_), batch.indices);
    auto out = pipeline_->train_step(batch.inputs, batch.targets, samples, buckets_.get(), timer,
                                     loss_scale);
    loss = out.loss;
    if (out.correct.defined()) epoch_correct_ += out.correct;
  } else if (data_parallel_) {
    if (timer) timer->end_phase(Phase::data);  // each replica's share is copied in forward
    DataParallel::Output out;
    {
      AutocastScope autocast(cuda, compute_dtype_);
      out = data_parallel_->forward(batch.inputs, batch.targets);
    }
    loss = out.loss;
    epoch_correct_ += out.correct;
    if (timer) timer->end_phase(Phase::forward);
    data_parallel_->backward(loss_scale);
    if (timer) timer->end_phase(Phase::backward);
    data_parallel_->reduce_gradients();
    if (timer) timer->end_phase(Phase::comm);
  } else {
    auto inputs = batch.inputs.to(device_, /*non_blocking=*/true);
    auto targets = batch.targets.to(device_, /*non_blocking=*/true);
    if (timer) timer->end_phase(Phase::data);
    torch::Tensor logits;
    if (cache) inputs = through_cached_prefix(inputs, batch.indices);
    {
      AutocastScope autocast(cuda, compute_dtype_);
      logits = cache ? models::forward_blocks(model_, prefix_cache_->blocks(),
                                              static_cast<int64_t>(model_->size()), inputs)
                     : model_->forward(inputs);
    }
    // The loss in float32 whatever the forward's autocast dtype.
    loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), targets);
    {
      torch::NoGradGuard no_grad;
      epoch_correct_ += logits.argmax(1).eq(targets).sum();
    }
    if (timer) timer->end_phase(Phase::forward);
    (loss_scale == 1.0 ? loss : loss * loss_scale).backward();
    if (timer) timer->end_phase(Phase::backward);
  }
  if (buckets_) {
    // Most buckets are in flight or done by now; this is the exposed wait.
    buckets_->finish();
    if (timer) timer->end_phase(Phase::comm);
  }
  const bool finite = unscale_gradients();
  if (finite && freezer_->checks_after(global_step_ + 1)) observe_gradients();
  if (fault_ && fault_->first == options_.env.rank && fault_->second == global_step_ + 1)
    throw std::runtime_error("injected fault at step " + std::to_string(global_step_ + 1) +
                             " on rank " + std::to_string(options_.env.rank));

  // fp16: a step with an overflowed gradient is skipped and the scale halved.
  if (finite) optimizer_->step();
  scaler_.update(finite);
  // Gradients are dropped rather than zeroed, as PyTorch 2's zero_grad() does:
  // backward then writes them fresh instead of adding to zeros.
  for (auto& p : model_->parameters()) p.mutable_grad().reset();
  if (data_parallel_) data_parallel_->broadcast_primary();
  if (timer) timer->end_phase(Phase::optimizer);

  ++global_step_;
  epoch_samples_ += samples;
  if (computes_loss()) epoch_scored_samples_ += samples;
  epoch_global_samples_ += samples * replicas_;
  if (!measure) return;
  timer_->end_step();
  if (pending_) {
    pending_->wall_ms =
        std::chrono::duration<double, std::milli>(step_started_ - pending_->started).count();
    if (auto times = timer_->take_previous()) finish_step(*pending_, *times);
  }
  PendingStep next;
  next.started = step_started_;
  next.record.rank = options_.env.rank;
  next.record.epoch = epoch;
  next.record.step = global_step_;
  next.record.samples = samples * replicas_;
  next.record.lr = lr;
  next.record.frozen_blocks = frozen;
  next.record.cached_samples = cached_samples_;
  if (scaler_.enabled()) {
    next.record.loss_scale = loss_scale;
    next.record.skipped = !finite;
  }
  if (pipeline_) {
    next.record.stage = pipeline_->plan().stage;
    next.record.replica = pipeline_->plan().replica;
    next.link = pipeline_->take_link_stats();
  }
  if (loss.defined()) next.loss = loss.detach();
  if (comm_) next.comm = comm_->take_stats();
  pending_ = std::move(next);
}

void Trainer::finish_step(PendingStep& pending, const PhaseTimes& times) {
  auto& r = pending.record;
  r.loss = std::nullopt;
  if (pending.loss.defined()) {
    r.loss = pending.loss.item<double>();
    epoch_loss_sum_ += *r.loss;
    ++epoch_loss_count_;
  }
  r.data_ms = times[Phase::data];
  r.forward_ms = times[Phase::forward];
  r.backward_ms = times[Phase::backward];
  r.comm_ms = times[Phase::comm];
  r.optimizer_ms = times[Phase::optimizer];
  r.step_ms = times.step_ms;
  // Per second of wall time, start to start: what the job delivers with
  // everything between the timed steps (records, bookkeeping) included.
  r.samples_per_s = pending.wall_ms > 0 ? r.samples / (pending.wall_ms / 1000.0) : 0.0;
  if (r.stage >= 0) {
    r.busy_ms = r.forward_ms + r.backward_ms;
    r.idle_ms = std::max(0.0, r.step_ms - r.data_ms - r.optimizer_ms - r.busy_ms);
  }
  const auto& link = pending.link;
  r.recv_act_bytes = link.activation_recv_bytes;
  r.recv_act_ms = link.activation_recv_ms;
  r.recv_grad_bytes = link.gradient_recv_bytes;
  r.recv_grad_ms = link.gradient_recv_ms;
  if (config_.compression.method != CompressionMethod::none && link.wire_bytes > 0) {
    r.compression_ratio = static_cast<double>(link.raw_bytes) / link.wire_bytes;
    r.encode_ms = link.encode_ms;
    r.decode_ms = link.decode_ms;
  }
  const auto& c = pending.comm;
  r.comm_busy_ms = c.busy_ms;
  r.bytes_sent = c.bytes_sent;
  r.bytes_recv = c.bytes_recv;
  r.comm_per_s = pending.wall_ms > 0 ? c.operations / (pending.wall_ms / 1000.0) : 0.0;
  if (c.allreduce_ms > 0) {
    // nccl-tests: algbw = payload / time; busbw = algbw x 2(P-1)/P for all-reduce.
    const double p = static_cast<double>(c.allreduce_ranks);
    r.algbw_gbps = c.allreduce_bytes / 1e9 / (c.allreduce_ms / 1000.0);
    r.busbw_gbps = r.algbw_gbps * 2.0 * (p - 1.0) / p;
  }
  const auto memory = memory_stats(device_.is_cuda(), device_.is_cuda() ? device_.index() : 0);
  r.mem_alloc = memory.allocated;
  r.mem_reserved = memory.reserved;
  r.mem_peak = memory.peak;
  step_work_.push_back({static_cast<double>(r.samples), r.samples_per_s});
  if (r.step > 1) {
    for (size_t i = 0; i < totals_.ms.size(); ++i) totals_.ms[i] += times.ms[i];
    totals_.step_ms += times.step_ms;
    ++measured_steps_;
  }
  emit(records::to_line(r));
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  auto correct = torch::zeros({}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  int64_t seen = 0;
  test_loader_->start_epoch(0);
  {
    std::optional<Communicator::Uncounted> bookkeeping;
    if (comm_) bookkeeping.emplace(*comm_);
    // One scope for the whole pass: the weights, unchanged throughout, are
    // cast to the compute dtype once rather than once a batch (the cast cache
    // is dropped when the outermost scope ends; a pipeline's own nests in it).
    AutocastScope autocast(device_.is_cuda(), compute_dtype_);
    while (auto batch = test_loader_->next()) {
      const int64_t n = batch->targets.size(0);
      if (pipeline_) {
        auto hits = pipeline_->evaluate(model_input(batch->inputs), batch->targets, n);
        if (hits.defined()) correct += hits;
      } else {
        auto logits = model_->forward(model_input(batch->inputs).to(device_));
        correct += logits.argmax(1).eq(batch->targets.to(device_)).sum();
      }
      seen += n;
    }
    if (pipeline_) pipeline_->take_link_stats();
  }
  set_training_mode();
  return fraction_over_ranks(correct, computes_loss() ? static_cast<double>(seen) : 0.0);
}

double Trainer::fraction_over_ranks(const torch::Tensor& hits, double count) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  auto counts = torch::stack({hits.to(options), torch::full({}, count, options)});
  if (comm_) {
    std::vector<torch::Tensor> tensors{counts};
    Communicator::Uncounted bookkeeping(*comm_);  // not a training step's traffic
    comm_->allreduce_sum(tensors);
  }
  const double total = counts[1].item<double>();
  return total > 0 ? counts[0].item<double>() / total : 0.0;
}

}  // namespace flotilla
