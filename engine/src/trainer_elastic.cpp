// elastic.pipe: PipeTransformer's AutoPipe and AutoDP (seed 000). Once the
// frozen prefix has grown so far that the blocks still training fit on half
// the stages, every rank changes layout together at a step boundary: each
// block's trained state goes from the rank that trained it to every rank,
// the pipelines are cut anew over fewer stages, the ranks freed become the
// replicas of new pipelines with new stage groups, and the global batch is
// re-split over the replicas. Every rank already holds the whole model (all
// build it from one seed) and every group is made over the one rendezvous, so
// no rank starts, stops or meets the others anew.
#include <chrono>
#include <csignal>
#include <iostream>

#include "codec/activation_codec.h"
#include "pipeline/partition.h"
#include "pipeline/stage_setup.h"
#include "trainer.h"

namespace flotilla {

void Trainer::consider_transition(int64_t epoch, int64_t next_batch) {
  if (frozen_applied_ == elastic_->decided_for_frozen) return;
  elastic_->decided_for_frozen = frozen_applied_;
  const auto next =
      next_elastic_layout(elastic_->costs, frozen_applied_, elastic_->layout, elastic_->budget_ms);
  if (next == elastic_->layout) return;
  // Said on stderr before and after: a rank lost in between leaves the first
  // line as its last words, which its supervisor reports.
  const std::string what = "elastic transition before step " + std::to_string(global_step_ + 1) +
                           " from " + elastic_->layout.describe() + " to " + next.describe();
  // Each line goes out in one write: the ranks of a node often share one
  // stderr file, and unbuffered piecewise writes interleave mid-line.
  const std::string said =
      "flotilla-train: rank " + std::to_string(options_.env.rank) + ": " + what;
  std::cerr << (said + " begins\n");
  try {
    transition(next, epoch, next_batch);
    std::cerr << (said + " done\n");
  } catch (const std::exception& e) {
    // A rank lost mid-way leaves the others in a collective that fails:
    // their words name what they were doing.
    throw std::runtime_error(
        "the elastic transition before step " + std::to_string(global_step_ + 1) + " from " +
        elastic_->layout.describe() + " to " + next.describe() + " failed: " + e.what());
  }
}

void Trainer::transition(const ElasticLayout& next, int64_t epoch, int64_t next_batch) {
  const auto started = std::chrono::steady_clock::now();
  // The last step's record gets its times now: its wall time ends here.
  finish_pending_step();
  const ElasticLayout from = elastic_->layout;
  std::map<const void*, optim::MultiTensorOptimizer::ParameterState> moved;
  const int64_t bytes_moved = share_trained_state(from, moved);

  // The old stage's hooks, groups and pipeline go before the new ones come.
  buckets_.reset();
  pipeline_.reset();
  gradient_comm_ = nullptr;
  replica_comm_.reset();

  const int64_t rank = options_.env.rank;
  PipelinePlan plan;
  plan.stages = next.stages;
  plan.stage = rank % next.stages;
  plan.replica = rank / next.stages;
  plan.balance = next.balance;
  plan.boundary_shapes = boundary_shapes(full_model_, elastic_->shape_example, next.balance);
  plan.schedule = config_.schedule;
  // The global batch is kept and re-split; each replica's micro-batches keep
  // their size where the chunks allow it, so each block sees batches as before.
  const int64_t started_replicas = elastic_->started_replicas;
  const int64_t batch = config_.batch_size * started_replicas / next.replicas;
  plan.chunks = std::max<int64_t>(1, config_.chunks * started_replicas / next.replicas);
  plan.checkpoint = config_.checkpoint;
  plan.compute_dtype = compute_dtype_;

  model_ = stage_blocks(full_model_, plan.balance, plan.stage);
  first_block_ = plan.first_block();
  replicas_ = next.replicas;
  if (next.stages == 1) {
    gradient_comm_ = comm_.get();  // every rank is a replica of the whole model
  } else {
    std::vector<int64_t> peers;
    for (int64_t r = 0; r < next.replicas; ++r) peers.push_back(r * next.stages + plan.stage);
    replica_comm_ = comm_->subgroup("elastic" + std::to_string(elastic_->transitions + 1) +
                                        ".stage" + std::to_string(plan.stage),
                                    peers);
    gradient_comm_ = replica_comm_.get();
  }
  pipeline_ =
      std::make_unique<Pipeline>(plan, model_, device_, *comm_, make_codec(config_.compression));
  if (config_.elastic.cache && first_block_ == 0 && !prefix_cache_)
    prefix_cache_ = std::make_unique<PrefixCache>(
        dataset_.train.size(), config_.elastic.cache_mb << 20,
        options_.scratch_folder.empty() ? std::filesystem::temp_directory_path()
                                        : options_.scratch_folder);
  if (prefix_cache_ && first_block_ != 0) prefix_cache_.reset();
  place_frozen_prefix();
  set_training_mode();

  // The optimizer over this rank's new blocks, each parameter with the state
  // its trainer left it in.
  optimizer_ = std::make_unique<optim::MultiTensorOptimizer>(
      config_.optimizer, model_->parameters(),
      optim::fastest_step_path(config_.optimizer.name, device_));
  for (const auto& p : model_->parameters())
    if (auto it = moved.find(p.unsafeGetTensorImpl()); it != moved.end())
      optimizer_->set_state(p, std::move(it->second));
  rebuild_buckets();
  rebuild_loaders(plan.replica, next.replicas, batch, epoch, next_batch);
  comm_->take_stats();  // the transition's own traffic is in its record, not a step's

  records::Transition record;
  record.rank = rank;
  record.epoch = epoch;
  record.step = global_step_ + 1;
  record.frozen_blocks = frozen_applied_;
  record.from_stages = from.stages;
  record.from_replicas = from.replicas;
  record.to_stages = next.stages;
  record.to_replicas = next.replicas;
  record.from_balance = from.balance;
  record.balance = next.balance;
  record.stage = plan.stage;
  record.replica = plan.replica;
  record.batch_per_replica = batch;
  record.chunks = plan.chunks;
  record.bytes_moved = bytes_moved;
  record.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  emit(records::to_line(record));
  elastic_->layout = next;
  ++elastic_->transitions;
}

int64_t Trainer::share_trained_state(
    const ElasticLayout& from,
    std::map<const void*, optim::MultiTensorOptimizer::ParameterState>& moved) {
  torch::NoGradGuard no_grad;
  Communicator::Uncounted setup(*comm_);
  const auto names = optimizer_->buffer_names();
  const auto columns = static_cast<int64_t>(names.size()) + 1;
  const auto offsets = stage_offsets(from.balance);
  const int64_t rank = options_.env.rank;
  int64_t received = 0;
  for (int64_t s = 0; s < from.stages; ++s) {
    // Replica 0's rank of stage s trained these blocks; every replica holds
    // the same parameters, and replica 0's buffers stand for them all.
    const int64_t owner = s;
    const bool mine = rank == owner;
    std::vector<torch::Tensor> params, buffers;
    for (int64_t b = offsets[s]; b < offsets[s + 1]; ++b) {
      const auto& block = (full_model_->begin() + b)->ptr();
      for (const auto& p : block->parameters()) params.push_back(p);
      for (const auto& t : block->buffers()) buffers.push_back(t);
    }
    // First which optimizer buffers exist (none before a parameter's first
    // step) and each parameter's step count, then the tensors themselves.
    const auto count = static_cast<int64_t>(params.size());
    auto header = torch::zeros({std::max<int64_t>(count, 1), columns}, torch::kInt64);
    std::vector<optim::MultiTensorOptimizer::ParameterState> states(params.size());
    if (mine)
      for (int64_t i = 0; i < count; ++i) {
        states[size_t(i)] = optimizer_->state_of(params[size_t(i)]);
        header[i][0] = states[size_t(i)].steps;
        for (size_t k = 0; k < names.size(); ++k)
          header[i][int64_t(k) + 1] = states[size_t(i)].buffers[k].defined() ? 1 : 0;
      }
    std::vector<torch::Tensor> message{header.to(device_)};
    comm_->broadcast(message, owner);
    header = message[0].cpu();

    std::vector<torch::Tensor> held;  // what each sent tensor is taken into
    for (const auto& t : params) held.push_back(t);
    for (const auto& t : buffers) held.push_back(t);
    std::vector<std::pair<int64_t, size_t>> optimizer_slots;  // (parameter, buffer)
    for (int64_t i = 0; i < count; ++i)
      for (size_t k = 0; k < names.size(); ++k)
        if (header[i][int64_t(k) + 1].item<int64_t>() != 0) {
          optimizer_slots.emplace_back(i, k);
          held.push_back(mine
                             ? states[size_t(i)].buffers[k]
                             : torch::empty_like(params[size_t(i)], torch::MemoryFormat::Preserve));
        }
    // Collectives take row-major tensors: channels_last ones go as copies.
    std::vector<torch::Tensor> sent;
    for (const auto& t : held) sent.push_back(t.is_contiguous() ? t : t.contiguous());
    comm_->broadcast(sent, owner);
    if (elastic_->killed_rank == rank) std::raise(SIGKILL);  // a test's lost rank
    if (mine) continue;
    for (size_t i = 0; i < held.size(); ++i) {
      if (!sent[i].is_same(held[i])) held[i].copy_(sent[i]);
      received += sent[i].numel() * sent[i].element_size();
    }
    for (int64_t i = 0; i < count; ++i) {
      auto& state = moved[params[size_t(i)].unsafeGetTensorImpl()];
      state.steps = header[i][0].item<int64_t>();
      state.buffers.assign(names.size(), torch::Tensor());
    }
    const size_t first_optimizer = params.size() + buffers.size();
    for (size_t j = 0; j < optimizer_slots.size(); ++j) {
      const auto [i, k] = optimizer_slots[j];
      moved[params[size_t(i)].unsafeGetTensorImpl()].buffers[k] = held[first_optimizer + j];
    }
  }
  // The owner keeps its own state: the new optimizer finds it by parameter.
  for (const auto& p : model_->parameters())
    if (!moved.count(p.unsafeGetTensorImpl()))
      moved[p.unsafeGetTensorImpl()] = optimizer_->state_of(p);
  return received;
}

void Trainer::rebuild_loaders(int64_t replica, int64_t replicas, int64_t batch_size, int64_t epoch,
                              int64_t next_batch) {
  auto train = data::training_loader_options(config_, replica, replicas, dataset_.augment);
  train.batch_size = batch_size;
  // A shard of `replicas` interleaved samples of one shuffled order: batch i
  // of every replica together is the same global batch i at any replica count.
  train_loader_ =
      std::make_unique<data::BatchLoader>(dataset_.train, dataset_.normalization, train);
  train_loader_->start_epoch(epoch, next_batch);
  test_loader_ = std::make_unique<data::BatchLoader>(
      dataset_.test, dataset_.normalization,
      data::evaluation_loader_options(config_, replica, replicas));
}

}  // namespace flotilla
