#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "field_reader.h"
#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/rank_placement.h"

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
  const int64_t blocks = model_block_count(c);
  if (stages > blocks)
    check.add("strategy", in_quotes(name_of(c.strategy)) + " cuts model " +
                              in_quotes(name_of(c.model)) + " at its block boundaries into " +
                              std::to_string(blocks) + " stages at most, got " +
                              std::to_string(stages) + " (" + std::to_string(world) + " ranks / " +
                              std::to_string(c.replicas) + " replicas)");
  if (c.balance.empty()) return;
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

void check_slurm(const SlurmConfig& s, Checker& check) {
  check.at_least_zero("slurm.nodes", s.nodes, "not a SLURM run");
  check.at_least_zero("slurm.gpus_per_node", s.gpus_per_node, "no GPU asked for");
  if (!s.enabled()) {
    if (s.gpus_per_node > 0 || !s.time.empty() || !s.partition.empty() || !s.account.empty() ||
        !s.extra.empty())
      check.add("slurm.nodes",
                "must be a positive number of nodes for the other slurm keys to apply, got " +
                    std::to_string(s.nodes));
    return;
  }
  // sbatch --time's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
  static const std::regex time_form(
      R"(([0-9]+(:[0-9]{1,2}){0,2})|([0-9]+-[0-9]{1,2}(:[0-9]{1,2}){0,2}))");
  if (!s.time.empty() && !std::regex_match(s.time, time_form))
    check.add(
        "slurm.time",
        "expected a SLURM time limit (minutes, HH:MM:SS or D-HH:MM:SS), got \"" + s.time + "\"");
  if (!s.partition.empty() && !valid_slurm_name(s.partition))
    check.add("slurm.partition", "expected a partition name, got \"" + s.partition + "\"");
  if (!s.account.empty() && !valid_slurm_name(s.account))
    check.add("slurm.account", "expected an account name, got \"" + s.account + "\"");
  // Options Flotilla sets itself from the config; a second value would fight it.
  static const std::vector<std::string> own = {
      "--nodes",     "--ntasks-per-node", "--gres",     "--gpus-per-node", "--time",
      "--partition", "--account",         "--job-name", "--output",        "--error",
      "--wrap",      "--chdir",           "--parsable"};
  static const std::regex option_form("--[A-Za-z][A-Za-z0-9-]*(=[^\\s]+)?");
  for (size_t i = 0; i < s.extra.size(); ++i) {
    const auto& option = s.extra[i];
    const std::string key = "slurm.extra[" + std::to_string(i) + "]";
    if (!std::regex_match(option, option_form)) {
      check.add(key,
                "expected one sbatch option as --name or --name=value, got \"" + option + "\"");
      continue;
    }
    const auto name = option.substr(0, option.find('='));
    if (std::find(own.begin(), own.end(), name) != own.end())
      check.add(key, name +
                         " is set by Flotilla from the config (slurm.nodes, gpus_per_node, "
                         "time, partition, account); give it there");
  }
}

void check_save(const SaveConfig& s, Checker& check) {
  check.at_least_zero("save.every_steps", s.every_steps, "not by steps");
  if (!(s.every_minutes >= 0))
    check.add("save.every_minutes",
              "must be 0 (not by time) or positive, got " + detail::describe(s.every_minutes));
  if (s.every_steps > 0 && s.every_minutes > 0)
    check.add("save", "every_steps and every_minutes are both set; give one of them");
  if (!s.enabled()) return;
  check.positive("save.keep", s.keep);
  if (s.dir.empty())
    check.add("save.dir", "must name a folder (relative to the run folder), got \"\"");
}

// elastic.pipe and elastic.dp: AutoPipe halves the pipeline as blocks freeze
// and AutoDP makes the ranks it frees replicas; one without the other would
// leave ranks idle, so they come together.
void check_elastic_pipeline(const ExperimentConfig& c, Checker& check) {
  const auto& e = c.elastic;
  if (!e.pipe && !e.dp) return;
  if (e.pipe != e.dp)
    check.add(e.pipe ? "elastic.dp" : "elastic.pipe",
              "AutoPipe (elastic.pipe) halves the pipeline and AutoDP (elastic.dp) makes the "
              "ranks it frees new replicas; one without the other leaves ranks idle: set both "
              "true");
  if (!is_pipeline(c.strategy))
    check.add("elastic.pipe",
              "re-cuts a pipeline as blocks freeze and needs strategy pipeline "
              "or pipeline_ddp, got " +
                  in_quotes(name_of(c.strategy)));
  if (c.freeze.method == FreezeMethod::none)
    check.add("elastic.pipe",
              "re-cuts the pipeline as its leading blocks freeze, but "
              "freeze.method is none: set freeze.method fixed or auto");
  if (c.save.enabled())
    check.add("elastic.pipe",
              "cannot be saved yet: a checkpoint holds one layout's stage; "
              "leave save unset");
  // The global batch is re-split over every replica count up to one per rank.
  const auto layout = run_layout(c);
  const int64_t global = replica_batch_size(c) * layout.replicas;
  if (c.ranks_per_node > 0 && !c.nodes.empty() && global > 0 && global % layout.world_size != 0)
    check.add("batch_size",
              "is re-split as an elastic pipeline gains replicas, up to one per "
              "rank: the global batch (" +
                  std::to_string(global) + ") must be a multiple of the " +
                  std::to_string(layout.world_size) + " ranks");
}

void check_elastic(const ExperimentConfig& c, Checker& check) {
  const auto& e = c.elastic;
  check_elastic_pipeline(c, check);
  if (!e.cache) return;
  check.positive("elastic.cache_mb", e.cache_mb);
  if (c.freeze.method == FreezeMethod::none)
    check.add("elastic.cache",
              "caches the outputs of the frozen leading blocks, but freeze.method is none: "
              "nothing ever freezes; set freeze.method fixed or auto");
  const bool augments =
      c.augment && (c.dataset == DatasetKind::cifar10 || c.dataset == DatasetKind::cifar100);
  if (augments)
    check.add("elastic.cache",
              "a randomly augmented sample's frozen-prefix output differs every epoch, so it "
              "cannot be cached; set augment false");
  if (c.strategy == Strategy::dp)
    check.add("elastic.cache",
              "is built for strategy single, ddp, pipeline and pipeline_ddp, not dp (one "
              "process driving several GPUs)");
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

// Height and width of the images the data set gives; nothing for token
// sequences or 1-d samples.
std::optional<std::pair<int64_t, int64_t>> image_size(const ExperimentConfig& c) {
  switch (c.dataset) {
    case DatasetKind::fashion_mnist:
    case DatasetKind::mnist:
      return std::make_pair(int64_t{28}, int64_t{28});
    case DatasetKind::cifar10:
    case DatasetKind::cifar100:
      return std::make_pair(int64_t{32}, int64_t{32});
    case DatasetKind::synthetic:
      if (c.synthetic.vocab == 0 && c.synthetic.shape.size() == 3)
        return std::make_pair(c.synthetic.shape[1], c.synthetic.shape[2]);
      break;
  }
  return std::nullopt;
}

bool reads_tokens(const ExperimentConfig& c) {
  return c.dataset == DatasetKind::synthetic && c.synthetic.vocab > 0;
}

void check_synthetic(const SyntheticConfig& s, Checker& check) {
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
  if (s.vocab < 0) {
    check.add("synthetic.vocab",
              "must be 0 (float samples) or positive (token ids), got " + std::to_string(s.vocab));
  } else if (s.vocab > 0) {
    // Token 0 starts every sequence and each class owns one keyword token;
    // the rest is filler (dataset.cpp).
    if (s.classes >= 2 && s.vocab < s.classes + 2)
      check.add("synthetic.vocab", "must hold a start token, one keyword per class and filler (" +
                                       std::to_string(s.classes + 2) + " for " +
                                       std::to_string(s.classes) + " classes), got " +
                                       std::to_string(s.vocab));
    if (shape_ok && (s.shape.size() != 1 || s.shape[0] < 2))
      check.add("synthetic.shape",
                "token sequences (synthetic.vocab > 0) are [length] with a length of at least 2, "
                "got " +
                    list_text(s.shape));
  }
}

void check_vit(const ExperimentConfig& c, Checker& check) {
  const auto& v = c.vit;
  check.positive("vit.patch", v.patch);
  check.positive("vit.dim", v.dim);
  check.positive("vit.depth", v.depth);
  check.positive("vit.heads", v.heads);
  check.positive("vit.mlp_dim", v.mlp_dim);
  if (v.heads > 0 && v.dim > 0 && v.dim % v.heads != 0)
    check.add("vit.heads", "must divide vit.dim (" + std::to_string(v.dim) + "), got " +
                               std::to_string(v.heads));
  const auto size = image_size(c);
  if (size && v.patch > 0 && (size->first % v.patch != 0 || size->second % v.patch != 0))
    check.add("vit.patch", "must divide the " + std::to_string(size->first) + "x" +
                               std::to_string(size->second) + " images of dataset " +
                               in_quotes(name_of(c.dataset)) + ", got " + std::to_string(v.patch));
}

void check_transformer(const ExperimentConfig& c, Checker& check) {
  const auto& t = c.transformer;
  check.positive("transformer.vocab", t.vocab);
  check.positive("transformer.hidden", t.hidden);
  check.positive("transformer.layers", t.layers);
  check.positive("transformer.heads", t.heads);
  check.positive("transformer.ffn", t.ffn);
  check.positive("transformer.max_positions", t.max_positions);
  if (t.heads > 0 && t.hidden > 0 && t.hidden % t.heads != 0)
    check.add("transformer.heads", "must divide transformer.hidden (" + std::to_string(t.hidden) +
                                       "), got " + std::to_string(t.heads));
  if (!reads_tokens(c)) return;
  const auto& s = c.synthetic;
  if (t.vocab > 0 && t.vocab < s.vocab)
    check.add("transformer.vocab", "must cover the token ids of synthetic.vocab (" +
                                       std::to_string(s.vocab) + "), got " +
                                       std::to_string(t.vocab));
  if (s.shape.size() == 1 && t.max_positions > 0 && t.max_positions < s.shape[0] + 2)
    check.add("transformer.max_positions",
              "must be at least the sequence length + 2 (positions count from 2, as in "
              "RoBERTa): " +
                  std::to_string(s.shape[0] + 2) + " for synthetic.shape " + list_text(s.shape) +
                  ", got " + std::to_string(t.max_positions));
}

// Image models take [channels, height, width] images, the transformer token ids.
void check_model_data(const ExperimentConfig& c, Checker& check) {
  if (c.model == ModelKind::transformer_encoder) {
    if (c.dataset != DatasetKind::synthetic)
      check.add("model", in_quotes(name_of(c.model)) +
                             " reads token ids: needs dataset \"synthetic\" with synthetic.vocab "
                             "> 0, got dataset " +
                             in_quotes(name_of(c.dataset)));
    else if (c.synthetic.vocab == 0)
      check.add("model", in_quotes(name_of(c.model)) +
                             " reads token ids: needs synthetic.vocab > 0, got float samples of "
                             "synthetic.shape " +
                             list_text(c.synthetic.shape));
    return;
  }
  if (reads_tokens(c))
    check.add("model", in_quotes(name_of(c.model)) + " takes images, but synthetic.vocab " +
                           std::to_string(c.synthetic.vocab) + " makes token sequences");
  else if (c.dataset == DatasetKind::synthetic && c.synthetic.shape.size() == 1)
    check.add("model", in_quotes(name_of(c.model)) +
                           " takes images [channels, height, width], got synthetic.shape " +
                           list_text(c.synthetic.shape));
}

}  // namespace

bool valid_slurm_name(const std::string& name) {
  static const std::regex form("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  return std::regex_match(name, form);
}

std::vector<std::string> validate(const ExperimentConfig& c) {
  Checker check;
  if (c.name.empty()) check.add("name", "must not be empty");
  check.positive("batch_size", c.batch_size);
  check.positive("epochs", c.epochs);
  check.at_least_zero("max_steps", c.max_steps, "no limit");
  if (!(c.bucket_mb > 0) || c.bucket_mb > 4096)
    check.add("bucket_mb",
              "must be above 0 and at most 4096 (MiB), got " + detail::describe(c.bucket_mb));
  check.at_least_zero("threads", c.threads, "the node's cores shared among its ranks");
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
  // A global batch is split evenly among the data-parallel replicas.
  const int64_t replicas = run_layout(c).replicas;
  if (c.batch_scope == BatchScope::global && replicas > 1 && c.batch_size > 0 &&
      c.batch_size % replicas != 0)
    check.add("batch_size", "with batch_scope global is split evenly among the " +
                                std::to_string(replicas) +
                                " data-parallel replicas: give a multiple of " +
                                std::to_string(replicas) + ", got " + std::to_string(c.batch_size));
  const int64_t replica_batch = replica_batch_size(c);
  if (c.chunks > replica_batch && replica_batch > 0)
    check.add("chunks", "must not exceed " +
                            std::string(replica_batch == c.batch_size
                                            ? "batch_size (" + std::to_string(c.batch_size) + ")"
                                            : "each replica's batch (" +
                                                  std::to_string(replica_batch) + ")") +
                            ", got " + std::to_string(c.chunks));
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
  if (c.devices < 0)
    check.add("devices", "must be 0 (every visible GPU) or a positive count, got " +
                             std::to_string(c.devices));
  else if (c.devices > 0 && c.strategy != Strategy::dp)
    check.add("devices", "is how many GPUs strategy dp's one process drives; with strategy " +
                             in_quotes(name_of(c.strategy)) +
                             " each rank has one (ranks_per_node)");
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
  if (c.channels_last && !is_cnn(c.model))
    check.add("channels_last",
              "applies to the CNNs (small_cnn, resnet18, mobilenet_v2, vgg13); "
              "model " +
                  in_quotes(name_of(c.model)) + " has no NHWC layout");
  check.at_least_zero("limits.memory_mb", c.limits.memory_mb, "no limit");
  check.at_least_zero("stall_timeout_s", c.stall_timeout_s, "never");
  if (c.dataset == DatasetKind::synthetic) check_synthetic(c.synthetic, check);
  check_model_data(c, check);
  if (c.model == ModelKind::vit) check_vit(c, check);
  if (c.model == ModelKind::transformer_encoder) check_transformer(c, check);
  check_freeze(c, check);
  check_elastic(c, check);
  check_compression(c, check);
  check_save(c.save, check);
  check_slurm(c.slurm, check);
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
      return 11;  // 10 conv blocks (the last of each stage pools), classifier
    case ModelKind::vit:
      return c.vit.depth + 2;  // patch embedding, encoder blocks, head
    case ModelKind::transformer_encoder:
      return c.transformer.layers + 2;  // embedding, encoder layers, head
  }
  return 0;
}

}  // namespace flotilla
