#include "plan/plan_prediction.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "codec/activation_codec.h"
#include "data/batch_loader.h"
#include "metrics/phase_timer.h"
#include "optim/multi_tensor_optimizer.h"
#include "pipeline/schedule.h"
#include "plan/block_profile.h"
#include "plan/core_sharing.h"
#include "plan/memory_prediction.h"
#include "plan/process_sharing.h"
#include "plan/tensor_memory.h"
#include "precision/mixed_precision.h"
#include "runtime/thread_pools.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

using Clock = std::chrono::steady_clock;

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The optimizer's step over every trainable parameter, as the trainer builds
// it (its fastest path on the device), on zero gradients: the median of three
// after one that allocates its state; and the bytes the gradients and that
// state take.
struct OptimizerCost {
  double step_ms = 0;
  int64_t gradient_bytes = 0, state_bytes = 0;
};

OptimizerCost optimizer_cost(const ExperimentConfig& config, torch::nn::Sequential& model,
                             const TensorMemoryWatch& memory) {
  OptimizerCost out;
  std::vector<torch::Tensor> params;
  for (auto& p : model->parameters())
    if (p.requires_grad()) params.push_back(p);
  if (params.empty()) return out;
  const auto device = params.front().device();
  const int64_t before = memory.in_use();
  for (auto& p : params) p.mutable_grad() = torch::zeros_like(p);
  const int64_t with_gradients = memory.in_use();
  out.gradient_bytes = with_gradients - before;
  std::vector<double> times;
  {
    optim::MultiTensorOptimizer optimizer(config.optimizer, params,
                                          optim::fastest_step_path(config.optimizer.name, device));
    for (int i = 0; i < 4; ++i) {
      const auto start = Clock::now();
      optimizer.step();
      synchronize(device);
      if (i > 0) times.push_back(ms_since(start));
      if (i == 0) out.state_bytes = std::max<int64_t>(memory.in_use() - with_gradients, 0);
    }
  }
  for (auto& p : params) p.mutable_grad().reset();
  out.step_ms = median(times);
  return out;
}

// The evaluation a rank runs at each epoch's end (Trainer::evaluate): the
// model in eval mode without gradients, on an evaluation batch, under the
// run's autocast; per block the most its tensors held above what was held
// before the pass (its input included, as intermediate outputs are freed).
std::vector<int64_t> evaluation_peaks(torch::nn::Sequential& model, const torch::Tensor& batch,
                                      Precision precision, TensorMemoryWatch& memory,
                                      int64_t& resident) {
  const bool was_training = model->is_training();
  model->eval();
  std::vector<int64_t> peaks(model->size(), 0);
  const auto device = batch.device();
  for (int pass = 0; pass < 2; ++pass) {
    torch::NoGradGuard no_grad;
    AutocastScope autocast(device.is_cuda(), compute_dtype(precision));
    const int64_t base = memory.in_use();
    auto x = batch;
    for (size_t b = 0; b < model->size(); ++b) {
      memory.mark();
      x = (model->begin() + static_cast<int64_t>(b))->forward(x);
      synchronize(device);
      peaks[b] = std::max(peaks[b], memory.peak() - base);
      if (!device.is_cuda()) resident = std::max(resident, memory_stats(false).allocated);
    }
  }
  if (was_training) model->train();
  return peaks;
}

// One encode and decode of a boundary's micro-batch, the median of three.
double codec_round_trip_ms(const ActivationCodec& codec, const std::vector<int64_t>& shape,
                           const torch::Device& device) {
  const auto values = torch::randn(shape, torch::TensorOptions().device(device));
  std::vector<double> times;
  for (int i = 0; i < 4; ++i) {
    const auto start = Clock::now();
    const auto decoded = codec.decode(codec.encode(values), values.numel());
    synchronize(device);
    if (i > 0) times.push_back(ms_since(start));
  }
  return median(times);
}

// Each block's forward and backward as a training step runs them: the model
// in training mode, the forward under the run's autocast, the data into the
// first block without a gradient (later blocks' inputs need one, as backward
// passes through them), the gradient from the block after made before the
// clock starts; two passes untimed (allocations, oneDNN's primitives), then
// the median of five. The balance's measure_block_costs is cheaper and
// coarser (eval mode, three passes). Also each block's tensors
// (memory_prediction.h's BlockMemory: held, peak, forward peak), counted in
// the same passes.
struct BlockMeasures {
  std::vector<BlockCost> costs;
  std::vector<predict::BlockMemory> memory;
  int64_t most_resident = 0;  // CPU: the process's, read after each forward and backward
};

BlockMeasures time_blocks_as_trained(torch::nn::Sequential& model, const torch::Tensor& example,
                                     Precision precision, TensorMemoryWatch& memory) {
  constexpr int kWarmup = 2, kTimed = 5;
  const bool was_training = model->is_training();
  model->train();
  const auto device = example.device();
  std::vector<std::vector<double>> forward(model->size()), backward(model->size());
  std::vector<std::vector<double>> held(model->size()), peak(model->size()),
      forward_peak(model->size());
  int64_t resident = 0;
  for (int pass = 0; pass < kWarmup + kTimed; ++pass) {
    auto x = example;
    for (size_t b = 0; b < model->size(); ++b) {
      auto input = b > 0 && x.is_floating_point() ? x.detach().requires_grad_(true) : x;
      const int64_t held_before = memory.in_use();
      memory.mark();
      auto start = Clock::now();
      torch::Tensor y;
      {
        AutocastScope autocast(device.is_cuda(), compute_dtype(precision));
        y = (model->begin() + static_cast<int64_t>(b))->forward(input);
      }
      synchronize(device);
      const double forward_ms = ms_since(start);
      const int64_t held_after = memory.in_use();
      const int64_t forward_top = memory.peak();
      if (!device.is_cuda()) resident = std::max(resident, memory_stats(false).allocated);
      double backward_ms = 0;
      if (y.requires_grad()) {
        const auto gradient = torch::ones_like(y);
        synchronize(device);
        start = Clock::now();
        y.backward(gradient);
        synchronize(device);
        backward_ms = ms_since(start);
      }
      if (!device.is_cuda()) resident = std::max(resident, memory_stats(false).allocated);
      if (pass >= kWarmup) {
        forward[b].push_back(forward_ms);
        backward[b].push_back(backward_ms);
        held[b].push_back(static_cast<double>(std::max<int64_t>(held_after - held_before, 0)));
        forward_peak[b].push_back(static_cast<double>(forward_top - held_before));
        peak[b].push_back(static_cast<double>(memory.peak() - held_before));
      }
      x = y.detach();
    }
    for (auto& p : model->parameters()) p.mutable_grad().reset();
  }
  // Once through the whole model, as a step is, for what the allocator
  // keeps resident besides tensors when every block's are held at once
  // (block by block, far less of it shows).
  for (int pass = 0; pass < 2 && !device.is_cuda(); ++pass) {
    torch::Tensor y;
    {
      AutocastScope autocast(false, compute_dtype(precision));
      y = model->forward(example);
    }
    resident = std::max(resident, memory_stats(false).allocated);
    y.backward(torch::ones_like(y));
    resident = std::max(resident, memory_stats(false).allocated);
    for (auto& p : model->parameters()) p.mutable_grad().reset();
  }
  if (!was_training) model->eval();
  BlockMeasures out;
  for (size_t b = 0; b < model->size(); ++b) {
    const double f = median(forward[b]);
    out.costs.push_back({f, f + median(backward[b])});
    predict::BlockMemory block;
    block.held = static_cast<int64_t>(median(held[b]));
    block.peak = static_cast<int64_t>(median(peak[b]));
    block.forward_peak = static_cast<int64_t>(median(forward_peak[b]));
    out.memory.push_back(block);
  }
  out.most_resident = resident;
  return out;
}

// Which of the run's ranks share a machine's CPU cores: the ranks of one
// node always, and those of nodes whose bench ranks said the same boot id
// (containers or namespaces of one machine). Machines are numbered 0, 1, ...
// in the order their first rank appears.
struct MachineSharing {
  std::vector<int64_t> rank_machine;  // by rank
  std::vector<int64_t> ranks_on;      // by machine
  std::vector<int64_t> cores;         // by machine; 0: unknown
  int64_t most_on_one() const {
    return ranks_on.empty() ? 1 : *std::max_element(ranks_on.begin(), ranks_on.end());
  }
};

MachineSharing machine_sharing(const RunPlan& plan, const std::optional<LinkMeasurements>& links) {
  MachineSharing out;
  std::map<std::string, int64_t> index;
  for (const auto& rank : plan.ranks) {
    std::string machine = "node " + rank.node;
    int64_t cores = 0;
    if (links)
      if (const auto it = links->nodes.find(rank.node); it != links->nodes.end()) {
        machine = it->second.machine;
        cores = it->second.cores;
      }
    const auto [it, added] = index.emplace(machine, static_cast<int64_t>(out.ranks_on.size()));
    if (added) {
      out.ranks_on.push_back(0);
      out.cores.push_back(cores);
    }
    out.rank_machine.push_back(it->second);
    ++out.ranks_on[static_cast<size_t>(it->second)];
  }
  return out;
}

double stage_trainable_share(const RunPlan& plan, const StagePlan& stage) {
  return plan.trainable > 0
             ? static_cast<double>(stage.trainable) / static_cast<double>(plan.trainable)
             : 0.0;
}

// Each stage's rank at its fullest (memory_prediction.h), from the loaded
// process and the profile's per-block and per-model bytes.
void predict_memory(const RunPlan& plan, const ExperimentConfig& config,
                    const BlockProfile& profile, int64_t timed_micro_batch,
                    const MemoryStats& loaded, const torch::Device& device, PredictionPlan& out) {
  const double scale = timed_micro_batch > 0 ? static_cast<double>(plan.micro_batch_sizes.front()) /
                                                   static_cast<double>(timed_micro_batch)
                                             : 1.0;
  const int64_t value_bytes =
      static_cast<int64_t>(c10::elementSize(compute_dtype(config.precision)));
  // The evaluation batch a rank will use, against the one measured: scaled
  // down only, since a planner given fewer samples than the batch had the
  // whole test split (or shard), as the rank will.
  const int64_t evaluation_batch =
      data::evaluation_loader_options(config, 0, plan.layout.replicas).batch_size;
  const double evaluation_scale =
      profile.evaluation_batch > 0
          ? std::min(1.0, static_cast<double>(evaluation_batch) /
                              static_cast<double>(profile.evaluation_batch))
          : 1.0;
  const auto scaled = [](double by, int64_t bytes) {
    return static_cast<int64_t>(by * static_cast<double>(bytes));
  };
  const auto stage_count = static_cast<int64_t>(plan.stages.size());
  out.memory.loaded_bytes = loaded.allocated;
  out.memory.loaded_peak_bytes = loaded.peak;
  out.memory.runtime_bytes = profile.runtime_bytes;
  out.memory.measured_as = device.is_cuda() ? "cuda_allocator" : "resident";
  for (int64_t s = 0; s < stage_count; ++s) {
    const auto& stage = plan.stages[static_cast<size_t>(s)];
    predict::RankMemoryInputs in;
    in.loaded_bytes = loaded.allocated;
    in.loaded_peak_bytes = loaded.peak;
    in.runtime_bytes = profile.runtime_bytes;
    const double share = stage_trainable_share(plan, stage);
    in.optimizer_state_bytes = scaled(share, profile.optimizer_state_bytes);
    for (int64_t b = stage.first_block; b < stage.first_block + stage.blocks; ++b) {
      if (b >= static_cast<int64_t>(profile.block_memory.size())) break;
      const auto& measured = profile.block_memory[static_cast<size_t>(b)];
      predict::BlockMemory block;
      block.held = scaled(scale, measured.held);
      block.peak = scaled(scale, measured.peak);
      block.forward_peak = scaled(scale, measured.forward_peak);
      block.frozen = b < plan.frozen_blocks;
      block.evaluation_peak = scaled(evaluation_scale, measured.evaluation_peak);
      // Gradients, in the share of the block's trainable parameters.
      block.gradient =
          plan.trainable > 0
              ? static_cast<int64_t>(
                    static_cast<double>(profile.gradient_bytes) *
                    static_cast<double>(plan.blocks[static_cast<size_t>(b)].trainable) /
                    static_cast<double>(plan.trainable))
              : 0;
      in.blocks.push_back(block);
    }
    if (plan.layout.pipelined) {
      in.live_micro_batches = peak_live_micro_batches(stage_schedule(
          config.schedule, stage_count, s, static_cast<int64_t>(plan.micro_batch_sizes.size())));
      if (s > 0)
        in.received_bytes = plan.boundaries[static_cast<size_t>(s - 1)].elements * value_bytes;
    }
    if (stage.allreduce && plan.layout.world_size > 1)
      in.bucket_bytes = stage.allreduce->bytes_per_step;
    const auto rank = predict::predict_rank_memory(in);
    out.stages[static_cast<size_t>(s)].peak_memory_bytes = rank.peak_bytes;
    out.stages[static_cast<size_t>(s)].training_memory_bytes = rank.training_bytes;
    out.stages[static_cast<size_t>(s)].evaluation_memory_bytes = rank.evaluation_bytes;
    out.memory.peak_bytes = std::max(out.memory.peak_bytes, rank.peak_bytes);
  }
  if (config.elastic.cache)
    out.notes.push_back(
        "memory: the AutoCache's frozen outputs (up to elastic.cache_mb) are not "
        "counted");
}

// The time a send/receive sweep measured at `bytes` (in log size between
// measured sizes; below the smallest, its time; beyond the largest, at its
// bandwidth), as a link whose latency is the whole crossing.
predict::LinkModel measured_crossing(const std::vector<std::pair<double, double>>& points,
                                     double bytes) {
  predict::LinkModel link;
  const auto above = std::lower_bound(
      points.begin(), points.end(), bytes,
      [](const std::pair<double, double>& point, double b) { return point.first < b; });
  if (above == points.begin()) {
    link.latency_ms = points.front().second;
  } else if (above == points.end()) {
    // Beyond the largest size, at its bandwidth.
    link.latency_ms = points.back().second * bytes / points.back().first;
  } else {
    const auto below = std::prev(above);
    const double t = (std::log(bytes) - std::log(below->first)) /
                     (std::log(above->first) - std::log(below->first));
    link.latency_ms = below->second + t * (above->second - below->second);
  }
  return link;
}

}  // namespace

const predict::AllReduceModel& LinkMeasurements::allreduce_beside_compute() const {
  return allreduce_computing.busbw_gbps_at_bytes.empty() ? allreduce : allreduce_computing;
}

predict::LinkModel LinkMeasurements::crossing_for(double bytes) const {
  return p2p_computing_ms_at_bytes.empty() ? link_for(bytes)
                                           : measured_crossing(p2p_computing_ms_at_bytes, bytes);
}

predict::LinkModel LinkMeasurements::link_for(double bytes) const {
  predict::LinkModel link;
  if (!p2p_ms_at_bytes.empty()) return measured_crossing(p2p_ms_at_bytes, bytes);
  if (allreduce.busbw_gbps_at_bytes.empty()) return link;
  const double hops = 2.0 * static_cast<double>(std::max<int64_t>(ranks, 2) - 1);
  link.latency_ms = smallest_time_ms / hops;
  // The bandwidth the sweep reached at this message size: busbw is what each
  // link of the ring carried.
  const double ring_ms = allreduce.time_ms(bytes, 2);  // P = 2: bytes / busbw
  if (ring_ms > 0) link.bytes_per_ms = bytes / ring_ms;
  return link;
}

LinkMeasurements parse_link_measurements(const std::string& json_text, const std::string& origin) {
  using nlohmann::json;
  const auto fail = [&](const std::string& what) { throw ConfigError({origin + ": " + what}); };
  const auto doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    fail("expected a JSON object with \"source\", \"ranks\" and \"allreduce\"");
  LinkMeasurements links;
  links.source = doc.value("source", std::string("(unnamed)"));
  if (!doc.contains("ranks") || !doc["ranks"].is_number_integer() ||
      doc["ranks"].get<int64_t>() < 2)
    fail("ranks: expected the bench's rank count, an integer of at least 2");
  links.ranks = doc["ranks"].get<int64_t>();
  if (!doc.contains("allreduce") || !doc["allreduce"].is_array() || doc["allreduce"].empty())
    fail("allreduce: expected a non-empty list of {bytes, time_us, busbw_gbps}");
  // A sweep's point's field, which must be a positive number.
  const auto positive = [&](const std::string& list, size_t i, const char* name) {
    const auto& point = doc[list][i];
    if (!point.is_object() || !point.contains(name) || !point[name].is_number() ||
        !(point[name].get<double>() > 0))
      fail(list + "[" + std::to_string(i) + "]." + name + ": expected a positive number");
    return point[name].get<double>();
  };
  for (const auto& [key, model] : {std::pair{"allreduce", &links.allreduce},
                                   std::pair{"allreduce_computing", &links.allreduce_computing}}) {
    if (!doc.contains(key)) continue;
    const std::string list = key;
    if (!doc[list].is_array()) fail(list + ": expected a list of {bytes, time_us, busbw_gbps}");
    double smallest_bytes = 0;
    for (size_t i = 0; i < doc[list].size(); ++i) {
      const double bytes = positive(list, i, "bytes"), time_us = positive(list, i, "time_us"),
                   busbw = positive(list, i, "busbw_gbps");
      model->busbw_gbps_at_bytes.emplace_back(bytes, busbw);
      if (model == &links.allreduce && (i == 0 || bytes < smallest_bytes)) {
        smallest_bytes = bytes;
        links.smallest_time_ms = time_us / 1000.0;
      }
    }
  }
  for (const auto& [key, sweep] : {std::pair{"p2p", &links.p2p_ms_at_bytes},
                                   std::pair{"p2p_computing", &links.p2p_computing_ms_at_bytes}}) {
    if (!doc.contains(key)) continue;
    const std::string list = key;
    if (!doc[list].is_array()) fail(list + ": expected a list of {bytes, time_us}");
    for (size_t i = 0; i < doc[list].size(); ++i)
      sweep->emplace_back(positive(list, i, "bytes"), positive(list, i, "time_us") / 1000.0);
    std::sort(sweep->begin(), sweep->end());
  }
  if (doc.contains("nodes")) {
    if (!doc["nodes"].is_object())
      fail("nodes: expected an object of node name to {machine, cores}");
    for (const auto& [name, node] : doc["nodes"].items()) {
      if (!node.is_object() || !node.contains("machine") || !node["machine"].is_string() ||
          node["machine"].get<std::string>().empty())
        fail("nodes." + name + ".machine: expected the node's boot id, a non-empty string");
      if (!node.contains("cores") || !node["cores"].is_number_integer() ||
          node["cores"].get<int64_t>() < 0)
        fail("nodes." + name + ".cores: expected a whole number of cores, 0 or more");
      links.nodes[name] = {node["machine"].get<std::string>(), node["cores"].get<int64_t>()};
    }
  }
  return links;
}

PredictionPlan predict_run_plan(const RunPlan& plan, const ExperimentConfig& config,
                                torch::nn::Sequential& model, const torch::Tensor& samples,
                                const std::optional<LinkMeasurements>& links,
                                const PlanOptions& options, const MemoryStats& loaded) {
  const auto started = Clock::now();
  PredictionPlan out;
  out.micro_batch = std::min<int64_t>(plan.micro_batch_sizes.front(), samples.size(0));
  out.samples_per_step = plan.batch_size * plan.layout.replicas;
  if (links) out.links = links->source;
  if (out.micro_batch < plan.micro_batch_sizes.front())
    out.notes.push_back("the blocks were timed on " + std::to_string(out.micro_batch) +
                        " samples, the test split's, not the micro-batch's " +
                        std::to_string(plan.micro_batch_sizes.front()));
  const auto device = samples.device();

  // The blocks as a rank runs them: a micro-batch through each, forward and
  // backward, the first step's frozen prefix forward only; from this
  // machine's profile of them when one is kept.
  std::optional<BlockProfile> profile;
  std::filesystem::path profile_dir = options.profile_dir;
  const auto key = profile_key(config, out.micro_batch, threads_per_rank(config, usable_cores()));
  if (!options.node_profiles_node.empty()) {
    std::string why_none;
    profile = find_node_profile(options.node_profiles_dir, options.node_profiles_node, config,
                                out.micro_batch, model->size(), why_none);
    if (profile) {
      out.block_costs = "node_profile";
      out.block_costs_node = options.node_profiles_node;
      // Another machine's times are not this machine's profile: nothing of
      // this prediction is kept.
      profile_dir.clear();
    } else {
      out.notes.push_back(why_none +
                          ": the blocks were timed on this machine (`flotilla nodes "
                          "profile " +
                          options.node_profiles_node + " RUN.yaml` times them there)");
    }
  }
  if (!profile && !profile_dir.empty() && !options.remeasure)
    profile = load_block_profile(profile_dir, key, model->size());
  if (profile) {
    if (out.block_costs != "node_profile") out.block_costs = "profile";
  } else {
    TensorMemoryWatch memory(device);
    const auto blocks = time_blocks_as_trained(model, samples.slice(0, 0, out.micro_batch),
                                               config.precision, memory);
    const auto optimizer = optimizer_cost(config, model, memory);
    int64_t resident = blocks.most_resident;
    const auto evaluation = evaluation_peaks(model, samples, config.precision, memory, resident);
    profile = BlockProfile{};
    profile->block_memory = blocks.memory;
    for (size_t b = 0; b < evaluation.size(); ++b)
      profile->block_memory[b].evaluation_peak = evaluation[b];
    profile->evaluation_batch = samples.size(0);
    profile->costs = blocks.costs;
    profile->gradient_bytes = optimizer.gradient_bytes;
    profile->optimizer_state_bytes = optimizer.state_bytes;
    profile->optimizer_ms = optimizer.step_ms;
    profile->measured_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    // What training keeps resident besides its tensors at their most: the
    // most resident the passes were seen at, beyond the loaded process and
    // the most tensors held. Not buffers (glibc gives it back on a trim) but
    // freed memory it cannot reuse yet: chunks in the arenas of the threads
    // that freed them, pieces between live tensors.
    if (!device.is_cuda())
      profile->runtime_bytes = std::max<int64_t>(resident - loaded.allocated - memory.highest(), 0);
    if (!profile_dir.empty()) save_block_profile(profile_dir, key, *profile);
  }
  out.block_costs_measured_ms = profile->measured_ms;
  if (!profile_dir.empty()) out.profile_file = (profile_dir / (key + ".json")).string();
  // Per block: forward, and backward (none for the first step's frozen prefix).
  std::vector<double> block_forward, block_backward;
  const auto full = costs_with_frozen(profile->costs, plan.frozen_blocks);
  for (size_t b = 0; b < full.size(); ++b) {
    block_forward.push_back(profile->costs[b].forward_ms);
    block_backward.push_back(full[b] - profile->costs[b].forward_ms);
  }
  // Ranks that share a machine's CPU slow each other: how much is measured
  // here, as the blocks are, and kept in the profile.
  const auto sharing = machine_sharing(plan, links);
  const int64_t most_at_once = device.is_cpu() ? sharing.most_on_one() : 1;
  const bool in_processes = !options.engine_binary.empty();
  const bool measured_less_well = in_processes && profile->core_sharing_by != "processes";
  std::string sharing_measured_on =
      out.block_costs == "node_profile" ? "node " + out.block_costs_node : "this machine";
  if (most_at_once > 1 &&
      (measured_less_well || most_at_once > static_cast<int64_t>(profile->core_sharing.size()))) {
    bool timed = false;
    if (in_processes) {
      // About a second and a half of steps alone: enough past the
      // trainings' uneven starts to hold several steps of all at once.
      double step_ms = profile->optimizer_ms;
      for (const auto& c : profile->costs) step_ms += c.full_ms;
      const auto steps = std::clamp<int64_t>(
          static_cast<int64_t>(std::ceil(1500.0 / std::max(step_ms, 0.01))), 8, 200);
      try {
        profile->core_sharing = measure_core_sharing_in_processes(
            options.engine_binary,
            one_rank_alone(config, out.micro_batch, threads_per_rank(config, usable_cores()),
                           steps),
            most_at_once, 60);
        profile->core_sharing_by = "processes";
        timed = true;
      } catch (const std::exception& e) {
        // The prediction goes on with the lesser measure, and says why.
        out.notes.push_back(std::string(e.what()) + "; timed in threads of the planner instead");
      }
    }
    if (!timed) {
      profile->core_sharing =
          measure_core_sharing(model, samples.slice(0, 0, out.micro_batch), most_at_once);
      profile->core_sharing_by = "threads";
    }
    if (out.block_costs == "node_profile")
      out.notes.push_back("node " + out.block_costs_node + "'s profile has no measure of " +
                          std::to_string(most_at_once) +
                          " ranks sharing its cores: timed on this machine");
    sharing_measured_on = "this machine";
    if (!profile_dir.empty()) save_block_profile(profile_dir, key, *profile);
  }
  if (options.on_profile)
    options.on_profile(node_profile_record(config, out.micro_batch,
                                           threads_per_rank(config, usable_cores()), *profile));
  const double optimizer_ms = profile->optimizer_ms;
  const auto codec = make_codec(config.compression);
  if (codec && !plan.boundaries.empty())
    out.codec_ms = codec_round_trip_ms(*codec, plan.boundaries.front().shape, device);

  const predict::AllReduceModel allreduce = links ? links->allreduce : predict::AllReduceModel{};
  const bool communicates = plan.layout.world_size > 1;
  if (communicates && !links)
    out.notes.push_back(
        "no link bench for these nodes: transfers and all-reduces are counted as free "
        "(flotilla nodes bench measures them)");
  if (config.strategy == Strategy::dp)
    out.notes.push_back("strategy dp: the devices' scatter and gather are not modelled");
  if (!plan.elastic.empty())
    out.notes.push_back("elastic: the first layout's step, before any transition");
  out.ranks_sharing_cores = most_at_once;
  out.core_sharing_slowdown = predict::sharing_slowdown(profile->core_sharing, most_at_once);
  if (most_at_once > 1) {
    std::ostringstream said;
    said << std::fixed << std::setprecision(2) << "up to " << most_at_once
         << " ranks share one machine's cores: each computes " << out.core_sharing_slowdown
         << "x slower than alone ("
         << (profile->core_sharing_by == "processes" ? "one-rank trainings at once"
                                                     : "passes in threads at once")
         << " on " << sharing_measured_on << ")";
    out.notes.push_back(said.str());
  }

  if (!plan.layout.pipelined) {
    predict::DdpInputs in;
    in.block_forward_ms = block_forward;
    in.block_backward_ms = block_backward;
    in.optimizer_ms = optimizer_ms;
    in.allreduce = allreduce;
    // Every rank computes at once, so the fullest machine sets the pace;
    // where its ranks' threads take every core, Gloo's all-reduce threads
    // have none to run beside the backward: the buckets wait for its end and
    // then take as long as the bench's all-reduce beside compute (measured
    // 1.6-2x the idle sweep on a 2-core VM, as the step records' exposed
    // communication was).
    if (most_at_once > 1) {
      in.slowdown = out.core_sharing_slowdown;
      for (size_t machine = 0; machine < sharing.ranks_on.size(); ++machine) {
        const int64_t cores = sharing.cores[machine] > 0 ? sharing.cores[machine] : usable_cores();
        if (sharing.ranks_on[machine] * threads_per_rank(config, cores) >= cores)
          in.comm_beside_backward = false;
      }
      const bool beside_compute = !in.comm_beside_backward && links &&
                                  !links->allreduce_computing.busbw_gbps_at_bytes.empty();
      if (beside_compute) {
        in.allreduce = links->allreduce_computing;
        out.notes.push_back(
            "the ranks' threads take every core: all-reduces timed as the link bench's "
            "all-reduce beside compute (every rank computing)");
      }
    }
    if (const auto& a = plan.stages.front().allreduce; a && communicates) {
      in.ranks = a->ranks;
      for (size_t b = 0; b < a->bucket_bytes.size(); ++b)
        in.buckets.emplace_back(a->bucket_closing_block[b],
                                static_cast<double>(a->bucket_bytes[b]));
    }
    out.step = predict::predict_ddp(in);
    PredictionPlan::Stage stage;
    stage.forward_ms = std::accumulate(block_forward.begin(), block_forward.end(), 0.0);
    stage.backward_ms = std::accumulate(block_backward.begin(), block_backward.end(), 0.0);
    stage.optimizer_ms = optimizer_ms;
    for (const auto& bucket : in.buckets)
      stage.allreduce_ms += in.allreduce.time_ms(bucket.second, in.ranks);
    out.stages.push_back(stage);
  } else {
    predict::PipelineInputs in;
    in.schedule = config.schedule;
    in.micro_batches = static_cast<int64_t>(plan.micro_batch_sizes.size());
    // The replicas' all-reduce runs while other stages compute; where ranks
    // share a machine's cores, that is the bench's all-reduce beside compute.
    in.allreduce = most_at_once > 1 && links ? links->allreduce_beside_compute() : allreduce;
    in.replicas = plan.layout.replicas;
    for (const auto& stage : plan.stages) {
      predict::StageCost cost;
      const auto first = static_cast<size_t>(stage.first_block);
      const auto end = first + static_cast<size_t>(stage.blocks);
      cost.forward_ms =
          std::accumulate(block_forward.begin() + first, block_forward.begin() + end, 0.0);
      cost.backward_ms =
          std::accumulate(block_backward.begin() + first, block_backward.begin() + end, 0.0);
      cost.optimizer_ms = optimizer_ms * stage_trainable_share(plan, stage);
      if (stage.allreduce)
        cost.allreduce_bytes = static_cast<double>(stage.allreduce->bytes_per_step);
      in.stages.push_back(cost);
      out.stages.push_back({cost.forward_ms, cost.backward_ms, cost.optimizer_ms,
                            in.allreduce.time_ms(cost.allreduce_bytes, in.replicas)});
    }
    // Each boundary's crossing at its own size (without links: free).
    for (const auto& boundary : plan.boundaries) {
      const auto bytes = static_cast<double>(boundary.activations.wire_bytes);
      in.boundary_bytes.push_back(bytes);
      in.boundary_codec_ms.push_back(out.codec_ms);
      in.boundary_links.push_back(links ? links->crossing_for(bytes) : predict::LinkModel{});
    }
    if (most_at_once > 1) {
      // Each stage on the machine most of its ranks (replicas) run on.
      in.core_sharing = profile->core_sharing;
      for (int64_t s = 0; s < static_cast<int64_t>(plan.stages.size()); ++s) {
        std::map<int64_t, int64_t> on_machine;
        for (const auto& rank : plan.ranks)
          if (rank.stage == s) ++on_machine[sharing.rank_machine[static_cast<size_t>(rank.rank)]];
        const auto fullest =
            std::max_element(on_machine.begin(), on_machine.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
        in.stage_machine.push_back(fullest == on_machine.end() ? 0 : fullest->first);
        in.stage_ranks.push_back(fullest == on_machine.end() ? 1 : fullest->second);
      }
    }
    for (size_t b = 0; b < in.boundary_bytes.size(); ++b)
      out.boundary_ms.push_back(in.boundary_links[b].time_ms(in.boundary_bytes[b]) +
                                in.boundary_codec_ms[b]);
    out.step = predict::predict_pipeline(in);
  }
  predict_memory(plan, config, *profile, out.micro_batch, loaded, device, out);
  out.samples_per_s = out.step.step_ms > 0
                          ? static_cast<double>(out.samples_per_step) / (out.step.step_ms / 1000.0)
                          : 0.0;
  out.took_ms = ms_since(started);
  return out;
}

}  // namespace flotilla
