#include <set>
#include <sstream>

#include "field_reader.h"
#include "flotilla/protocol/experiment_config.h"

namespace flotilla {
namespace {

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

std::string list_text(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << "]";
  return out.str();
}

bool is_pipeline(Strategy s) {
  return s == Strategy::pipeline || s == Strategy::pipeline_ddp;
}

class Checker {
 public:
  void positive(const char* key, int64_t value) {
    if (value <= 0) add(key, "must be a positive integer, got " + std::to_string(value));
  }
  void at_least_zero(const char* key, int64_t value, const char* meaning) {
    if (value < 0)
      add(key,
          std::string("must be 0 (") + meaning + ") or positive, got " + std::to_string(value));
  }
  void in_range(const char* key, double value, double lo, double hi, bool hi_open) {
    bool ok = value >= lo && (hi_open ? value < hi : value <= hi);
    if (!ok) {
      std::ostringstream out;
      out << "must be in [" << lo << ", " << hi << (hi_open ? ")" : "]") << ", got " << value;
      add(key, out.str());
    }
  }
  void add(const std::string& key, const std::string& what) {
    problems.push_back(key + ": " + what);
  }

  std::vector<std::string> problems;
};

void check_pipeline(const ExperimentConfig& c, Checker& check) {
  const int64_t world = c.world_size();
  if (c.strategy == Strategy::pipeline_ddp) {
    if (c.replicas < 2 || world % c.replicas != 0) {
      if (c.replicas < 2)
        check.add("replicas", "pipeline_ddp needs at least 2 pipeline replicas, got " +
                                  std::to_string(c.replicas));
      else
        check.add("replicas", "must divide the " + std::to_string(world) +
                                  " ranks (ranks_per_node x nodes), got " +
                                  std::to_string(c.replicas));
      return;  // the stage count below would only repeat this
    }
  } else if (c.replicas != 1) {
    check.add("replicas", "only pipeline_ddp runs several pipeline replicas; got " +
                              std::to_string(c.replicas) + " with strategy " +
                              in_quotes(name_of(c.strategy)));
  }
  const int64_t stages = c.replicas > 0 ? world / c.replicas : 0;
  if (stages < 2)
    check.add("strategy", in_quotes(name_of(c.strategy)) +
                              " needs at least 2 stages per pipeline, got " +
                              std::to_string(stages) + " (" + std::to_string(world) + " ranks / " +
                              std::to_string(c.replicas) + " replicas)");
  if (c.balance.empty()) return;
  const int64_t blocks = model_block_count(c);
  int64_t sum = 0;
  for (int64_t b : c.balance) sum += b;
  if (std::any_of(c.balance.begin(), c.balance.end(), [](int64_t b) { return b < 1; }))
    check.add("balance", "every stage needs at least 1 block, got " + list_text(c.balance));
  else if (sum != blocks)
    check.add("balance", "must sum to the " + std::to_string(blocks) + " blocks of model " +
                             in_quotes(name_of(c.model)) + ", got " + list_text(c.balance) +
                             " (sum " + std::to_string(sum) + ")");
  else if (stages >= 2 && static_cast<int64_t>(c.balance.size()) != stages)
    check.add("balance", "needs one entry per pipeline stage (" + std::to_string(stages) +
                             "), got " + std::to_string(c.balance.size()));
}

void check_freeze(const ExperimentConfig& c, Checker& check) {
  const auto& f = c.freeze;
  if (f.method == FreezeMethod::autofreeze) {
    if (!(f.alpha > 0 && f.alpha <= 1)) check.in_range("freeze.alpha", f.alpha, 0, 1, false);
    check.positive("freeze.check_every", f.check_every);
    if (!(f.tolerance > 0 && f.tolerance < 1))
      check.add("freeze.tolerance",
                "must be above 0 and below 1, got " + detail::describe(f.tolerance));
  }
  if (f.method == FreezeMethod::fixed && f.schedule.empty())
    check.add("freeze.schedule", "method \"fixed\" needs at least one {at_step, blocks} entry");
  const int64_t blocks = model_block_count(c);
  int64_t last_step = -1, last_blocks = 0;
  for (size_t i = 0; i < f.schedule.size(); ++i) {
    const auto& s = f.schedule[i];
    std::string key = "freeze.schedule[" + std::to_string(i) + "]";
    if (s.at_step <= last_step)
      check.add(key + ".at_step", "must be greater than the previous entry's (" +
                                      std::to_string(last_step) + "), got " +
                                      std::to_string(s.at_step));
    if (s.blocks <= last_blocks || s.blocks >= blocks)
      check.add(key + ".blocks", "must grow from the previous entry's " +
                                     std::to_string(last_blocks) + " and stay below the " +
                                     std::to_string(blocks) + " blocks of the model, got " +
                                     std::to_string(s.blocks));
    last_step = s.at_step;
    last_blocks = s.blocks;
  }
}

void check_compression(const ExperimentConfig& c, Checker& check) {
  const auto& z = c.compression;
  if (z.method == CompressionMethod::none) return;
  if (!is_pipeline(c.strategy))
    check.add("compression.method",
              in_quotes(name_of(z.method)) +
                  " compresses activations between pipeline stages; strategy " +
                  in_quotes(name_of(c.strategy)) + " has none");
  if (z.bits < 1 || z.bits > 16)
    check.add("compression.bits", "must be in 1..16, got " + std::to_string(z.bits));
  if (z.method == CompressionMethod::sort_quant) {
    if (z.split_bits < 0 || z.split_bits > 16)
      check.add("compression.split_bits", "must be in 0..16, got " + std::to_string(z.split_bits));
  } else if (z.split_bits != CompressionConfig{}.split_bits && z.split_bits != 0) {
    check.add("compression.split_bits", "only sort_quant splits values into groups; got " +
                                            std::to_string(z.split_bits) + " with method " +
                                            in_quotes(name_of(z.method)));
  }
}

}  // namespace

std::vector<std::string> validate(const ExperimentConfig& c) {
  Checker check;
  if (c.name.empty()) check.add("name", "must not be empty");
  check.positive("batch_size", c.batch_size);
  check.positive("epochs", c.epochs);
  check.at_least_zero("max_steps", c.max_steps, "no limit");
  if (!(c.bucket_mb > 0) || c.bucket_mb > 4096)
    check.add("bucket_mb",
              "must be above 0 and at most 4096 (MiB), got " + detail::describe(c.bucket_mb));
  check.at_least_zero("threads", c.threads, "LibTorch's default");
  check.positive("ranks_per_node", c.ranks_per_node);
  check.positive("chunks", c.chunks);
  if (c.nodes.empty()) check.add("nodes", "needs at least one node name");
  std::set<std::string> seen;
  for (const auto& n : c.nodes) {
    if (n.empty())
      check.add("nodes", "node names must not be empty");
    else if (!seen.insert(n).second)
      check.add("nodes", "lists " + in_quotes(n) + " twice");
  }
  if (c.chunks > c.batch_size && c.batch_size > 0)
    check.add("chunks", "must not exceed batch_size (" + std::to_string(c.batch_size) + "), got " +
                            std::to_string(c.chunks));
  if (!is_pipeline(c.strategy)) {
    if (c.chunks > 1)
      check.add("chunks", "only pipeline strategies split a batch into micro-batches; got " +
                              std::to_string(c.chunks) + " with strategy " +
                              in_quotes(name_of(c.strategy)));
    if (!c.balance.empty())
      check.add("balance", "only pipeline strategies cut the model into stages; got " +
                               list_text(c.balance) + " with strategy " +
                               in_quotes(name_of(c.strategy)));
    if (c.checkpoint)
      check.add("checkpoint", "recomputes pipeline stages; strategy " +
                                  in_quotes(name_of(c.strategy)) + " has none");
  }
  if (c.ranks_per_node > 0 && !c.nodes.empty()) {
    if (c.strategy == Strategy::single && c.world_size() != 1)
      check.add("strategy", "\"single\" trains on one rank, but ranks_per_node x nodes is " +
                                std::to_string(c.world_size()));
    if (is_pipeline(c.strategy)) check_pipeline(c, check);
  }
  if (c.strategy == Strategy::dp && c.device != DeviceKind::cuda)
    check.add("strategy", "\"dp\" drives several GPUs from one process and needs device \"cuda\"");
  if (c.strategy == Strategy::dp && c.ranks_per_node > 0 && c.world_size() != 1)
    check.add("strategy",
              "\"dp\" is one process driving every GPU of its node, but ranks_per_node "
              "x nodes is " +
                  std::to_string(c.world_size()));
  if (c.optimizer.lr <= 0)
    check.add("optimizer.lr", "must be positive, got " + detail::describe(c.optimizer.lr));
  check.in_range("optimizer.momentum", c.optimizer.momentum, 0, 1, true);
  if (c.optimizer.weight_decay < 0)
    check.add("optimizer.weight_decay",
              "must not be negative, got " + detail::describe(c.optimizer.weight_decay));
  check.at_least_zero("lr_schedule.warmup_steps", c.lr_schedule.warmup_steps, "no warm-up");
  check.positive("lr_schedule.step_epochs", c.lr_schedule.step_epochs);
  if (!(c.lr_schedule.gamma > 0 && c.lr_schedule.gamma <= 1))
    check.in_range("lr_schedule.gamma", c.lr_schedule.gamma, 0, 1, false);
  check.in_range("dropout", c.dropout, 0, 1, true);
  if (c.dataset == DatasetKind::synthetic) {
    const auto& s = c.synthetic;
    bool shape_ok = (s.shape.size() == 1 || s.shape.size() == 3) &&
                    std::all_of(s.shape.begin(), s.shape.end(), [](int64_t d) { return d > 0; });
    if (!shape_ok)
      check.add("synthetic.shape",
                "must be [channels, height, width] or [length] with positive sizes, got " +
                    list_text(s.shape));
    if (s.classes < 2)
      check.add("synthetic.classes", "must be at least 2, got " + std::to_string(s.classes));
    check.positive("synthetic.train_samples", s.train_samples);
    check.positive("synthetic.test_samples", s.test_samples);
  }
  check_freeze(c, check);
  check_compression(c, check);
  return check.problems;
}

int64_t model_block_count(const ExperimentConfig& c) {
  switch (c.model) {
    case ModelKind::small_cnn:
      return 4;
    case ModelKind::resnet18:
      return 10;  // stem, 8 basic blocks, head
    case ModelKind::mobilenet_v2:
      return 20;  // stem, 17 inverted residuals, 1x1 conv, head
    case ModelKind::vgg13:
      return 11;  // 10 conv blocks, classifier
    case ModelKind::vit:
      return 14;  // patch embedding, 12 encoder blocks, head
    case ModelKind::transformer_encoder:
      return 14;  // embedding, 12 layers, head
  }
  return 0;
}

}  // namespace flotilla
