// The trainer's checkpoints (config save, flotilla-train --resume): each
// rank's whole training state in one file, written at the same step by every
// rank, and taken back so that the run goes on as if never stopped: on the
// CPU bit for bit (the test compares every loss after the resume).
#include <ATen/Context.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trainer.h"

namespace flotilla {
namespace {

using Archive = torch::serialize::OutputArchive;

torch::Tensor int64s(std::vector<int64_t> values) {
  return torch::tensor(values, torch::kInt64);
}

// The config's keys whose change would make the saved state mean something
// else; a resumed run may change only how long it trains, how it saves, its
// name, its node names (a requeued job's nodes) and its threads.
bool may_change_on_resume(const std::string& pointer) {
  for (const char* key : {"/name", "/epochs", "/max_steps", "/save/", "/stall_timeout_s",
                          "/threads", "/nodes/", "/data_dir"})
    if (pointer.rfind(key, 0) == 0) return true;
  return false;
}

std::vector<std::string> changed_keys(const std::string& saved_json, const ExperimentConfig& now) {
  const auto before = nlohmann::json::parse(saved_json).flatten();
  const auto after = nlohmann::json::parse(to_json(now)).flatten();
  std::vector<std::string> changed;
  for (const auto* side : {&before, &after})
    for (auto it = side->begin(); it != side->end(); ++it) {
      const auto& other = side == &before ? after : before;
      const auto there = other.find(it.key());
      if ((there == other.end() || *there != it.value()) && !may_change_on_resume(it.key()))
        changed.push_back(it.key().substr(1));
    }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (auto& key : changed) std::replace(key.begin(), key.end(), '/', '.');
  return changed;
}

}  // namespace

bool Trainer::checkpoint_due() {
  const auto& save = config_.save;
  if (!save.enabled() || done()) return false;
  if (save.every_steps > 0) return global_step_ % save.every_steps == 0;
  // By time: rank 0's clock decides for every rank, which must save the same step.
  bool due = std::chrono::steady_clock::now() - last_save_ >=
             std::chrono::duration<double, std::ratio<60>>(save.every_minutes);
  if (comm_) {
    std::vector<torch::Tensor> flag{
        torch::full({1}, due ? 1 : 0, torch::TensorOptions().dtype(torch::kInt64).device(device_))};
    Communicator::Uncounted bookkeeping(*comm_);
    comm_->broadcast(flag, 0);
    due = flag[0].item<int64_t>() != 0;
  }
  return due;
}

void Trainer::save_checkpoint(int64_t epoch, int64_t next_batch) {
  // The step saved is on record before its state is: a resumed run's records go on from it.
  finish_pending_step();
  torch::NoGradGuard no_grad;
  Archive archive;
  const auto& env = options_.env;
  archive.write(
      "identity",
      int64s({env.rank, env.world_size, first_block_, static_cast<int64_t>(model_->size())}), true);
  const std::string config_json = to_json(config_);
  archive.write(
      "config",
      torch::tensor(std::vector<uint8_t>(config_json.begin(), config_json.end()), torch::kUInt8),
      true);
  archive.write(
      "progress",
      int64s({global_step_, epoch, next_batch, frozen_applied_, epoch_samples_, epoch_loss_count_}),
      true);
  archive.write("epoch_loss_sum", torch::tensor({epoch_loss_sum_}, torch::kFloat64), true);
  archive.write("epoch_correct", epoch_correct_.cpu(), true);
  for (const auto& p : model_->named_parameters())
    archive.write("model." + p.key(), p.value(), true);
  for (const auto& b : model_->named_buffers()) archive.write("buffer." + b.key(), b.value(), true);
  optimizer_->save(archive);
  const auto scale = scaler_.state();
  archive.write("loss_scale",
                torch::tensor(std::vector<double>(scale.begin(), scale.end()), torch::kFloat64),
                true);
  const auto freezer = freezer_->state();
  archive.write("freezer.frozen", int64s({freezer.frozen}), true);
  archive.write("freezer.previous", torch::tensor(freezer.previous, torch::kFloat64), true);
  {
    auto generator = at::globalContext().defaultGenerator(torch::kCPU);
    std::lock_guard lock(generator.mutex());
    archive.write("rng.cpu", generator.get_state(), true);
  }
  if (device_.is_cuda()) {
    auto generator = at::globalContext().defaultGenerator(device_);
    std::lock_guard lock(generator.mutex());
    archive.write("rng.cuda", generator.get_state(), true);
  }
  std::ostringstream bytes;
  archive.save_to(bytes);
  checkpoints_->write(global_step_, bytes.str());
  // Older checkpoints go only once every rank holds this one: a step all
  // ranks hold always remains, even with keep 1.
  if (comm_) {
    Communicator::Uncounted bookkeeping(*comm_);
    comm_->barrier();
  }
  checkpoints_->keep_newest(config_.save.keep);
  last_save_ = std::chrono::steady_clock::now();
}

int64_t Trainer::newest_common_checkpoint() {
  const auto mine = checkpoints_->steps();
  if (!comm_) return mine.empty() ? 0 : mine.back();
  // Rank 0's steps go to every rank, each says which it holds, and the
  // newest that all hold wins: ranks on other nodes see other disks.
  Communicator::Uncounted setup(*comm_);
  const auto on_device = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  std::vector<torch::Tensor> count{torch::full({1}, static_cast<int64_t>(mine.size()), on_device)};
  comm_->broadcast(count, 0);
  const int64_t n = count[0].item<int64_t>();
  if (n == 0) return 0;
  std::vector<torch::Tensor> steps{comm_->rank() == 0 ? int64s(mine).to(device_)
                                                      : torch::empty({n}, on_device)};
  comm_->broadcast(steps, 0);
  const auto candidates = steps[0].cpu();
  auto held = torch::zeros({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i)
    if (std::binary_search(mine.begin(), mine.end(), candidates[i].item<int64_t>())) held[i] = 1;
  std::vector<torch::Tensor> votes{held.to(device_)};
  comm_->allreduce_sum(votes);
  const auto holders = votes[0].cpu();
  for (int64_t i = n - 1; i >= 0; --i)
    if (holders[i].item<int64_t>() == comm_->size()) return candidates[i].item<int64_t>();
  return 0;
}

void Trainer::restore_checkpoint(int64_t step) {
  const std::string file = checkpoints_->file(step).string();
  auto fail = [&](const std::string& what) {
    return std::runtime_error("checkpoint " + file + ": " + what);
  };
  torch::serialize::InputArchive archive;
  try {
    std::istringstream bytes(checkpoints_->read(step));
    archive.load_from(bytes);
  } catch (const c10::Error& e) {
    throw fail(std::string("not a checkpoint LibTorch can read: ") + e.what_without_backtrace());
  }
  auto read = [&](const std::string& key) {
    torch::Tensor t;
    if (!archive.try_read(key, t, true)) throw fail("holds no " + key);
    return t;
  };
  const auto& env = options_.env;
  const auto identity = read("identity");
  const std::vector<int64_t> expected{env.rank, env.world_size, first_block_,
                                      static_cast<int64_t>(model_->size())};
  const std::vector<int64_t> found(identity.data_ptr<int64_t>(),
                                   identity.data_ptr<int64_t>() + identity.numel());
  if (found != expected) {
    auto layout = [](const std::vector<int64_t>& v) {
      if (v.size() != 4) return std::string("unknown");
      return "rank " + std::to_string(v[0]) + " of " + std::to_string(v[1]) + ", blocks " +
             std::to_string(v[2]) + ".." + std::to_string(v[2] + v[3] - 1);
    };
    throw fail("written by " + layout(found) + "; this is " + layout(expected));
  }
  const auto saved_config = read("config");
  const auto changed =
      changed_keys(std::string(saved_config.data_ptr<uint8_t>(),
                               saved_config.data_ptr<uint8_t>() + saved_config.numel()),
                   config_);
  if (!changed.empty()) {
    std::string keys;
    for (const auto& k : changed) keys += (keys.empty() ? "" : ", ") + k;
    throw fail("saved by a run with other values of " + keys +
               "; resume with the config it was saved with (only name, epochs, max_steps, "
               "save, threads, nodes' names, data_dir and stall_timeout_s may change)");
  }

  torch::NoGradGuard no_grad;
  auto load_into = [&](const std::string& prefix,
                       const torch::OrderedDict<std::string, torch::Tensor>& tensors) {
    for (const auto& t : tensors) {
      const auto saved = read(prefix + t.key());
      if (saved.sizes() != t.value().sizes())
        throw fail(prefix + t.key() + " has shape " + c10::str(saved.sizes()) + ", the model's " +
                   c10::str(t.value().sizes()));
      t.value().copy_(saved);
    }
  };
  load_into("model.", model_->named_parameters());
  load_into("buffer.", model_->named_buffers());

  const auto progress = read("progress");
  if (progress.numel() != 6)
    throw fail("progress holds " + std::to_string(progress.numel()) + " values, not 6");
  const auto at = [&](int64_t i) { return progress[i].item<int64_t>(); };
  global_step_ = at(0);
  start_epoch_ = at(1);
  start_batch_ = at(2);
  epoch_samples_ = at(4);
  // A checkpointed run keeps its layout (elastic.pipe saves none), so the
  // samples this rank scored and every replica's follow from its own.
  epoch_scored_samples_ = computes_loss() ? epoch_samples_ : 0;
  epoch_global_samples_ = epoch_samples_ * replicas_;
  epoch_loss_count_ = at(5);
  epoch_loss_sum_ = read("epoch_loss_sum")[0].item<double>();
  epoch_correct_ = read("epoch_correct").to(device_);

  const auto frozen = read("freezer.frozen");
  const auto previous = read("freezer.previous").contiguous();
  freezer_->restore({frozen[0].item<int64_t>(),
                     std::vector<double>(previous.data_ptr<double>(),
                                         previous.data_ptr<double>() + previous.numel())});
  // The frozen blocks stop their gradients and leave the buckets before the
  // optimizer's state, which follows the parameters, comes back.
  apply_freezing(at(3));
  try {
    optimizer_->load(archive);
  } catch (const std::exception& e) {
    throw fail(e.what());
  }
  const auto scale = read("loss_scale");
  scaler_.restore({scale[0].item<double>(), scale[1].item<double>(), scale[2].item<double>()});
  if (data_parallel_) data_parallel_->broadcast_primary();
  // The random streams last: nothing after them draws before training goes on.
  {
    auto generator = at::globalContext().defaultGenerator(torch::kCPU);
    std::lock_guard lock(generator.mutex());
    generator.set_state(read("rng.cpu"));
  }
  if (device_.is_cuda()) {
    auto generator = at::globalContext().defaultGenerator(device_);
    std::lock_guard lock(generator.mutex());
    generator.set_state(read("rng.cuda"));
  }
  resumed_from_ = step;
}

}  // namespace flotilla
