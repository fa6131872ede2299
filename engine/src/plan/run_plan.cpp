#include "plan/run_plan.h"

#include <torch/torch.h>

#include <chrono>
#include <limits>

#include "codec/activation_codec.h"
#include "comm/gradient_buckets.h"
#include "data/batch_loader.h"
#include "data/dataset.h"
#include "flotilla/engine/training.h"
#include "freeze/freezer.h"
#include "metrics/phase_timer.h"
#include "models/model_factory.h"
#include "pipeline/partition.h"
#include "pipeline/pipeline.h"
#include "pipeline/schedule.h"
#include "pipeline/stage_setup.h"
#include "plan/plan_prediction.h"
#include "precision/mixed_precision.h"
#include "runtime/thread_pools.h"
#include "torch_adapter.h"

namespace flotilla {
namespace {

using Clock = std::chrono::steady_clock;

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// "flotilla::models::ConvBnReluImpl" -> "ConvBnRelu"
std::string kind_of(const torch::nn::Module& module) {
  std::string kind = module.name();
  if (auto colon = kind.rfind("::"); colon != std::string::npos) kind.erase(0, colon + 2);
  if (kind.size() > 4 && kind.compare(kind.size() - 4, 4, "Impl") == 0)
    kind.resize(kind.size() - 4);
  return kind;
}

// One sample of the data set's shape, all zeros (token 0 is RoBERTa's <s>):
// enough to find the shapes that cross each boundary.
torch::Tensor zero_sample(const DataShape& shape) {
  std::vector<int64_t> dims{1};
  dims.insert(dims.end(), shape.sample.begin(), shape.sample.end());
  return torch::zeros(dims, shape.vocab > 0 ? torch::kInt64 : torch::kFloat32);
}

// Forward time of each block on `example`, the fastest of five passes (the
// first pays one-off costs such as oneDNN's primitive creation, and a block
// of a millisecond is easily caught by a preemption: with two passes one
// estimate in ten cut MobileNetV2 1.8x apart, issue 25): a cheap stand-in
// for measure_block_ms's forward and backward of a micro-batch.
std::vector<double> estimate_block_ms(torch::nn::Sequential& model, const torch::Tensor& example) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<double> best(model->size(), std::numeric_limits<double>::infinity());
  for (int pass = 0; pass < 5; ++pass) {
    auto x = example;
    for (size_t b = 0; b < model->size(); ++b) {
      const auto start = Clock::now();
      x = (model->begin() + b)->forward(x);
      best[b] = std::min(best[b], ms_since(start));
    }
  }
  return best;
}

// The layouts an elastic pipeline goes through as its prefix freezes, by the
// trainer's rule (next_elastic_layout) on measured costs, or on estimated
// forward times with backward taken as twice the forward.
void plan_elastic_layouts(RunPlan& plan, const ExperimentConfig& config,
                          torch::nn::Sequential& model, const torch::Tensor& samples,
                          bool measuring) {
  std::vector<BlockCost> costs;
  if (measuring) {
    costs = measure_block_costs(model, measuring_example(samples, config));
    plan.elastic_costs = "measured";
  } else {
    for (double forward : estimate_block_ms(model, samples))
      costs.push_back({forward, 3 * forward});
    plan.elastic_costs = "estimated";
  }
  ElasticLayout layout{plan.layout.stages, plan.layout.replicas, plan.balance};
  const double budget = slowest_stage(costs_with_frozen(costs, 0), plan.balance);
  const auto consider = [&](int64_t frozen, int64_t at_step) {
    const auto next = next_elastic_layout(costs, frozen, layout, budget);
    if (next == layout) return;
    plan.elastic.push_back({frozen, at_step, next});
    layout = next;
  };
  const auto blocks = static_cast<int64_t>(model->size());
  Freezer freezer(config.freeze, blocks);
  if (config.freeze.method == FreezeMethod::fixed) {
    for (const auto& entry : config.freeze.schedule)
      consider(std::min(entry.blocks, freezer.limit()), entry.at_step);
  } else {
    for (int64_t frozen = 1; frozen <= freezer.limit(); ++frozen) consider(frozen, -1);
  }
}

// Payload of one direction across a boundary whose tensors hold `per_sample`
// values a sample, for micro-batches of `sizes`; uncompressed, each value
// takes `value_bytes` (the compute dtype's: 2 in bf16 and fp16).
TransferPlan transfer(const ActivationCodec* codec, int64_t per_sample,
                      const std::vector<int64_t>& sizes, bool sent, int64_t value_bytes) {
  auto wire = [&](int64_t elements) {
    return codec ? codec->encoded_bytes(elements) : elements * value_bytes;
  };
  TransferPlan t;
  t.sent = sent;
  t.fp32_bytes = sizes.front() * per_sample * int64_t{sizeof(float)};
  t.wire_bytes = wire(sizes.front() * per_sample);
  if (!sent) return t;
  for (int64_t size : sizes) {
    t.fp32_bytes_per_step += size * per_sample * int64_t{sizeof(float)};
    t.wire_bytes_per_step += wire(size * per_sample);
  }
  return t;
}

// The all-reduce a stage's ranks run each step, as Trainer::rebuild_buckets
// sets it up: the stage's trainable parameters in GradientBuckets' buckets,
// laid out by their float32 bytes and sent at `value_bytes` a value (2 where
// precision is bf16 or fp16).
AllreducePlan allreduce_of(const torch::nn::Sequential& blocks, int64_t ranks, double bucket_mb,
                           int64_t value_bytes) {
  AllreducePlan a;
  a.ranks = ranks;
  std::vector<int64_t> bytes, values, block_of;
  int64_t index = 0;
  for (const auto& block : *blocks) {
    for (const auto& p : block.ptr()->parameters())
      if (p.requires_grad()) {
        bytes.push_back(p.numel() * p.element_size());
        values.push_back(p.numel());
        block_of.push_back(index);
      }
    ++index;
  }
  if (bytes.empty()) return a;  // a wholly frozen stage averages nothing
  for (const auto& bucket :
       GradientBuckets::assign(bytes, static_cast<int64_t>(bucket_mb * 1024 * 1024))) {
    int64_t total = 0;
    int64_t closing = index;
    for (size_t i : bucket) {
      total += values[i] * value_bytes;
      closing = std::min(closing, block_of[i]);
    }
    a.bucket_bytes.push_back(total);
    a.bucket_closing_block.push_back(closing);
    a.bytes_per_step += total;
  }
  return a;
}

}  // namespace

RunPlan make_run_plan(const ExperimentConfig& given, const PlanOptions& options) {
  const auto started = Clock::now();
  // The batch each replica trains, as a rank does (batch_scope global splits it).
  const auto config = with_replica_batch(given);
  // Measuring (or estimating) block times with the pools a rank would have.
  set_compute_threads(threads_per_rank(config, usable_cores()));
  RunPlan plan;
  plan.name = config.name;
  plan.model = name_of(config.model);
  plan.dataset = name_of(config.dataset);
  plan.strategy = name_of(config.strategy);
  plan.schedule = name_of(config.schedule);
  plan.device = name_of(config.device);
  plan.layout = run_layout(config);
  plan.batch_size = config.batch_size;
  plan.chunks = plan.layout.pipelined ? config.chunks : 1;
  plan.micro_batch_sizes = micro_batch_sizes(config.batch_size, plan.chunks);
  const int64_t stages = plan.layout.stages;
  // A links file that is not a bench is refused before anything is measured.
  std::optional<LinkMeasurements> links;
  if (options.predict && !options.links_json.empty())
    links = parse_link_measurements(options.links_json, options.links_origin);
  // Predicting times every block of the model a rank builds, on its data.
  const bool measuring =
      options.predict || (options.measure && plan.layout.pipelined && config.balance.empty());

  // Measuring builds the model and reads the data exactly as a rank does;
  // otherwise only the model's structure and shapes matter, not its values.
  torch::nn::Sequential model;
  torch::Tensor samples;  // measuring: the first evaluation batch; else one zero sample
  MemoryStats loaded;     // measuring: this process, data and model loaded
  DataShape shape = data::expected_shape(config);
  torch::Device device(torch::kCPU);
  if (measuring) {
    if (auto problems = unsupported_features(config); !problems.empty())
      throw ConfigError(problems);
    if (config.device == DeviceKind::cuda) device = torch::Device(torch::kCUDA, 0);
    torch::manual_seed(config.seed);
    const auto dataset = data::load_dataset(config);
    shape = dataset.shape;
    model = build_model(config, shape);
    model->to(device);
    data::BatchLoader loader(dataset.test, dataset.normalization,
                             data::evaluation_loader_options(config, 0, plan.layout.replicas));
    loader.start_epoch(0);
    auto batch = loader.next();
    if (!batch)
      throw std::runtime_error("the test split is empty: no sample to measure the blocks on");
    samples = batch->inputs.to(device);
    loaded = memory_stats(device.is_cuda(), 0);
  } else {
    {
      RandomInitialisationSkipped skipped;
      model = build_model(config, shape);
    }
    samples = zero_sample(shape);
    // Samples run through the blocks to find boundary shapes and estimate a
    // balance. The weights are as allocated: zeroed first, so that no
    // leftover denormal or NaN makes a block slower than trained weights.
    if (plan.layout.stages > 1) {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.zero_();
    }
  }
  plan.input_shape = shape.sample;
  plan.vocab = shape.vocab;
  plan.classes = shape.classes;

  // The first step's frozen prefix, applied as the trainer applies it.
  const auto block_count = static_cast<int64_t>(model->size());
  Freezer freezer(config.freeze, block_count);
  plan.frozen_blocks = freezer.enabled() ? freezer.frozen_at(1) : 0;
  freeze_leading_blocks(model, 0, plan.frozen_blocks);
  int64_t index = 0;
  for (const auto& child : model->named_children()) {
    BlockPlan block;
    block.index = index++;
    block.name = child.key();
    block.kind = kind_of(*child.value());
    block.parameters = parameter_count(*child.value());
    block.trainable = parameter_count(*child.value(), true);
    plan.parameters += block.parameters;
    plan.trainable += block.trainable;
    plan.blocks.push_back(std::move(block));
  }

  if (!plan.layout.pipelined) {
    plan.balance = {block_count};
    plan.balance_source = "whole model";
  } else if (!config.balance.empty()) {
    plan.balance = config.balance;
    plan.balance_source = "given";
  } else {
    const auto start = Clock::now();
    if (measuring) {
      plan.balance =
          measured_balance(model, measuring_example(samples, config), stages, &plan.block_ms);
      plan.balance_source = "measured";
    } else {
      plan.block_ms = estimate_block_ms(model, samples);
      plan.balance = balance_by_cost(plan.block_ms, stages);
      plan.balance_source = "estimated";
    }
    plan.measure_ms = ms_since(start);
  }

  if (config.elastic.pipe && plan.layout.pipelined)
    plan_elastic_layouts(plan, config, model, samples, measuring);

  const auto codec = make_codec(config.compression);
  plan.codec = codec ? codec->describe() : "none";
  // One sample through the blocks up to the last boundary, as every rank
  // finds its shapes at start. On the reference BLAS this is most of a
  // large transformer's plan (RoBERTa-base: seconds; an operator-level meta
  // device run would avoid it, but LibTorch 1.13's Module::to refuses meta).
  const auto shapes = stages > 1 ? boundary_shapes(model, shape_example(samples), plan.balance)
                                 : std::vector<std::vector<int64_t>>{};
  // Boundaries and gradient buckets carry the compute dtype (a bf16 run on a
  // Gloo without bfloat16 sends float16: two bytes alike).
  const int64_t value_bytes =
      static_cast<int64_t>(c10::elementSize(compute_dtype(config.precision)));
  for (int64_t b = 0; b + 1 < stages; ++b) {
    BoundaryPlan boundary;
    boundary.boundary = b;
    boundary.sample_shape = shapes[b];
    boundary.shape = {plan.micro_batch_sizes.front()};
    boundary.shape.insert(boundary.shape.end(), shapes[b].begin(), shapes[b].end());
    boundary.elements = element_count(boundary.shape);
    const int64_t per_sample = element_count(shapes[b]);
    // Gradients come back to stage b when stage b + 1's input needs one.
    PipelinePlan receiver;
    receiver.stages = stages;
    receiver.stage = b + 1;
    receiver.balance = plan.balance;
    boundary.activations =
        transfer(codec.get(), per_sample, plan.micro_batch_sizes, true, value_bytes);
    boundary.gradients = transfer(codec.get(), per_sample, plan.micro_batch_sizes,
                                  receiver.input_needs_grad(plan.frozen_blocks), value_bytes);
    plan.boundaries.push_back(std::move(boundary));
  }

  // Who all-reduces with whom, as the trainer decides it: ddp's whole world
  // (one rank included), pipeline_ddp's stage peers across replicas.
  std::optional<int64_t> group;
  if (config.strategy == Strategy::ddp) group = plan.layout.world_size;
  if (plan.layout.pipelined && plan.layout.replicas > 1) group = plan.layout.replicas;
  const auto offsets = stage_offsets(plan.balance);
  for (int64_t s = 0; s < stages; ++s) {
    StagePlan stage;
    stage.stage = s;
    stage.first_block = offsets[s];
    stage.blocks = plan.balance[s];
    for (int64_t b = offsets[s]; b < offsets[s + 1]; ++b) {
      stage.parameters += plan.blocks[b].parameters;
      stage.trainable += plan.blocks[b].trainable;
    }
    int64_t allreduce_bytes = 0;
    if (group) {
      stage.allreduce =
          allreduce_of(stage_blocks(model, plan.balance, s), *group, config.bucket_mb, value_bytes);
      allreduce_bytes = stage.allreduce->bytes_per_step;
    }
    stage.bytes_sent_per_step = stage.bytes_recv_per_step = allreduce_bytes;
    if (s + 1 < stages) {
      const auto& next = plan.boundaries[s];
      stage.bytes_sent_per_step += next.activations.wire_bytes_per_step;
      stage.bytes_recv_per_step += next.gradients.wire_bytes_per_step;
    }
    if (s > 0) {
      const auto& previous = plan.boundaries[s - 1];
      stage.bytes_recv_per_step += previous.activations.wire_bytes_per_step;
      stage.bytes_sent_per_step += previous.gradients.wire_bytes_per_step;
    }
    plan.stages.push_back(std::move(stage));
  }
  plan.ranks = rank_placements(config);
  if (options.predict)
    plan.prediction = predict_run_plan(plan, config, model, samples, links, options, loaded);
  plan.elapsed_ms = ms_since(started);
  return plan;
}

}  // namespace flotilla
