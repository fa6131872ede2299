#include "flotilla/protocol/config_keys.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "enum_names.h"
#include "yaml_json.h"

namespace flotilla {
namespace {

using nlohmann::json;
using G = ConfigGroup;
using T = ConfigKeyType;

template <typename E>
std::vector<std::string> choices_of() {
  std::vector<std::string> out;
  for (const auto& [value, name] : detail::EnumNames<E>::table) out.emplace_back(name);
  return out;
}

bool is_pipeline(const ExperimentConfig& c) {
  return c.strategy == Strategy::pipeline || c.strategy == Strategy::pipeline_ddp;
}

// A value as YAML's flow style writes it: text bare, lists in brackets.
std::string flow_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + flow_text(value[i]);
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : value.items()) {
      out += (first ? "" : ", ") + k + ": " + flow_text(v);
      first = false;
    }
    return out + "}";
  }
  return value.dump();  // numbers and booleans; nlohmann prints them locale-independently
}

// The value at a dotted key of a document; null when absent.
const json* at_key(const json& document, std::string_view key) {
  const json* node = &document;
  while (!key.empty()) {
    const size_t dot = key.find('.');
    const std::string part(key.substr(0, dot));
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    key = dot == std::string_view::npos ? std::string_view() : key.substr(dot + 1);
  }
  return node;
}

// The defaults as the YAML export writes them. Out of line: GCC 12 at -O3
// takes the temporary config's vectors for uninitialised when inlined here.
[[gnu::noinline]] json default_document() {
  const ExperimentConfig config;
  return json::parse(to_json(config));
}

struct Row {
  const char* key;
  G group;
  T type;
  const char* allowed;
  const char* description;
  const char* applies_when = "";
  bool (*applies)(const ExperimentConfig&) = nullptr;
  std::vector<std::string> choices = {};
};

std::vector<ConfigKey> build_table() {
  const auto vit = [](const ExperimentConfig& c) { return c.model == ModelKind::vit; };
  const auto transformer = [](const ExperimentConfig& c) {
    return c.model == ModelKind::transformer_encoder;
  };
  const auto synthetic = [](const ExperimentConfig& c) {
    return c.dataset == DatasetKind::synthetic;
  };
  const auto cifar = [](const ExperimentConfig& c) {
    return c.dataset == DatasetKind::cifar10 || c.dataset == DatasetKind::cifar100;
  };
  const auto files = [](const ExperimentConfig& c) { return c.dataset != DatasetKind::synthetic; };
  const auto pipelined = [](const ExperimentConfig& c) { return is_pipeline(c); };
  const auto replicated = [](const ExperimentConfig& c) {
    return c.strategy == Strategy::pipeline_ddp;
  };
  const auto data_parallel = [](const ExperimentConfig& c) { return c.strategy == Strategy::dp; };
  const auto all_reduces = [](const ExperimentConfig& c) {
    return c.strategy == Strategy::ddp || c.strategy == Strategy::pipeline_ddp;
  };
  const auto autofreeze = [](const ExperimentConfig& c) {
    return c.freeze.method == FreezeMethod::autofreeze;
  };
  const auto freezing = [](const ExperimentConfig& c) {
    return c.freeze.method != FreezeMethod::none;
  };
  const auto caching = [](const ExperimentConfig& c) { return c.elastic.cache; };
  const auto elastic_pipeline = [](const ExperimentConfig& c) {
    return is_pipeline(c) && c.freeze.method != FreezeMethod::none;
  };
  const auto saving = [](const ExperimentConfig& c) { return c.save.enabled(); };
  const auto slurm_run = [](const ExperimentConfig& c) { return c.slurm.enabled(); };
  const auto fixed_freeze = [](const ExperimentConfig& c) {
    return c.freeze.method == FreezeMethod::fixed;
  };
  const auto compressing = [](const ExperimentConfig& c) {
    return is_pipeline(c) && c.compression.method != CompressionMethod::none;
  };
  const auto sort_quant = [](const ExperimentConfig& c) {
    return is_pipeline(c) && c.compression.method == CompressionMethod::sort_quant;
  };
  const auto sgd = [](const ExperimentConfig& c) { return c.optimizer.name == OptimizerKind::sgd; };
  const auto warms_up = [](const ExperimentConfig& c) {
    return c.lr_schedule.name != LrScheduleKind::constant;
  };
  const auto steps = [](const ExperimentConfig& c) {
    return c.lr_schedule.name == LrScheduleKind::step;
  };
  const auto cnn = [](const ExperimentConfig& c) { return is_cnn(c.model); };

  const std::vector<Row> rows = {
      // Experiment
      {"name", G::experiment, T::text, "not empty",
       "The experiment's name: runs, the experiment list and exports are labelled with it."},
      {"epochs", G::experiment, T::integer, "a positive integer",
       "Passes over the training split; the test split is evaluated after each."},
      {"max_steps", G::experiment, T::integer, "0 (no limit) or a positive integer",
       "Stops the run after this many training steps, whatever the epochs."},
      {"seed", G::experiment, T::unsigned_integer, "a non-negative integer",
       "Seeds model initialisation, data order and synthetic data, so a run can be repeated."},
      // Model
      {"model", G::model, T::choice, "one of the models",
       "The network trained, as an ordered list of blocks that a pipeline can cut at any "
       "boundary.",
       "", nullptr, choices_of<ModelKind>()},
      {"dropout", G::model, T::number, "in [0, 1)",
       "Dropout probability: before the classifier of the CNNs; on embeddings, attention weights "
       "and residual branches of the ViT and the transformer."},
      {"vit.preset",
       G::model,
       T::choice,
       "small or b16",
       "Fills in the ViT sizes (b16: ViT-B/16's 16, 768, 12, 12, 3072); the sizes beside it "
       "override it, and an export writes the sizes themselves.",
       "model vit",
       vit,
       {"small", "b16"}},
      {"vit.patch", G::model, T::integer, "a positive integer dividing the image height and width",
       "Side of the square patches the image is cut into.", "model vit", vit},
      {"vit.dim", G::model, T::integer, "a positive integer", "Width of the patch embeddings.",
       "model vit", vit},
      {"vit.depth", G::model, T::integer, "a positive integer",
       "Encoder blocks; the model has depth + 2 blocks.", "model vit", vit},
      {"vit.heads", G::model, T::integer, "a positive integer dividing vit.dim",
       "Attention heads of each encoder block.", "model vit", vit},
      {"vit.mlp_dim", G::model, T::integer, "a positive integer",
       "Hidden width of each encoder block's MLP.", "model vit", vit},
      {"transformer.vocab", G::model, T::integer, "a positive integer, at least synthetic.vocab",
       "Rows of the token embedding (RoBERTa-base: 50265).", "model transformer_encoder",
       transformer},
      {"transformer.hidden", G::model, T::integer, "a positive integer", "Width of the encoder.",
       "model transformer_encoder", transformer},
      {"transformer.layers", G::model, T::integer, "a positive integer",
       "Encoder layers; the model has layers + 2 blocks.", "model transformer_encoder",
       transformer},
      {"transformer.heads", G::model, T::integer, "a positive integer dividing transformer.hidden",
       "Attention heads of each layer.", "model transformer_encoder", transformer},
      {"transformer.ffn", G::model, T::integer, "a positive integer",
       "Hidden width of each layer's feed-forward block.", "model transformer_encoder",
       transformer},
      {"transformer.max_positions", G::model, T::integer,
       "a positive integer, at least the sequence length + 2",
       "Rows of the position table; positions count from 2 as in RoBERTa.",
       "model transformer_encoder", transformer},
      // Data
      {"dataset", G::data, T::choice, "one of the data sets",
       "The data trained on: image files, or synthetic tensors of any shape for throughput runs.",
       "", nullptr, choices_of<DatasetKind>()},
      {"data_dir", G::data, T::text, "a folder on the training nodes; empty: the default",
       "Where the data set's files are on the nodes that train (Fashion-MNIST: Debian's "
       "/usr/share/datasets/fashion-mnist).",
       "dataset other than synthetic", files},
      {"augment", G::data, T::boolean, "true or false",
       "Random crop with padding 4 and horizontal flip of the training images.",
       "dataset cifar10 or cifar100", cifar},
      {"batch_size", G::data, T::integer, "a positive integer",
       "Samples per step of each data-parallel replica (a pipeline's batch, split into chunks); "
       "with batch_scope global, of all replicas together."},
      {"batch_scope", G::data, T::choice, "per_replica or global",
       "What batch_size counts: each replica's samples a step, or all replicas' together "
       "(each then trains batch_size / replicas, and an epoch has as many steps as on one "
       "replica: a seed's global batch).",
       "strategy ddp or pipeline_ddp", all_reduces, choices_of<BatchScope>()},
      {"synthetic.shape", G::data, T::integer_list,
       "[channels, height, width] or [length], positive sizes",
       "Shape of one synthetic sample: an image, or a token sequence when synthetic.vocab > 0.",
       "dataset synthetic", synthetic},
      {"synthetic.classes", G::data, T::integer, "at least 2", "Number of labels.",
       "dataset synthetic", synthetic},
      {"synthetic.train_samples", G::data, T::integer, "a positive integer",
       "Samples in the synthetic training split.", "dataset synthetic", synthetic},
      {"synthetic.test_samples", G::data, T::integer, "a positive integer",
       "Samples in the synthetic test split.", "dataset synthetic", synthetic},
      {"synthetic.vocab", G::data, T::integer, "0, or at least classes + 2",
       "0: float samples; above 0: token ids below vocab whose label can be learnt (for the "
       "transformer).",
       "dataset synthetic", synthetic},
      // Strategy and placement
      {"strategy", G::strategy, T::choice, "one of the strategies",
       "How ranks share the work: one device, DataParallel, DDP, a pipeline, or pipelines "
       "replicated with DDP.",
       "", nullptr, choices_of<Strategy>()},
      {"nodes", G::strategy, T::name_list, "node names from the nodes list, each once",
       "The machines that run the ranks, rank 0's first; local alone means this machine."},
      {"ranks_per_node", G::strategy, T::integer, "a positive integer",
       "Training processes on each node; the world size is ranks_per_node x nodes (x slurm.nodes "
       "on a SLURM login node)."},
      {"devices", G::strategy, T::integer, "0 (every visible GPU) or a positive integer",
       "GPUs of the node that strategy dp's one process drives (nn.DataParallel: the batch "
       "split over them, the gradients summed on the first).",
       "strategy dp", data_parallel},
      {"replicas", G::strategy, T::integer, "at least 2, dividing the world size",
       "Pipeline replicas that train on their own shard; rank = replica x stages + stage.",
       "strategy pipeline_ddp", replicated},
      {"bucket_mb", G::strategy, T::number, "above 0, at most 4096",
       "Gradient bucket size in MiB, each all-reduced as soon as backward has written it "
       "(PyTorch DDP's bucket_cap_mb).",
       "strategy ddp or pipeline_ddp", all_reduces},
      // Pipeline
      {"schedule", G::pipeline, T::choice, "gpipe or 1f1b",
       "GPipe runs every forward then every backward; 1F1B alternates them and keeps fewer "
       "activations.",
       "strategy pipeline or pipeline_ddp", pipelined, choices_of<Schedule>()},
      {"chunks", G::pipeline, T::integer, "a positive integer, at most batch_size",
       "Micro-batches each batch is split into; more chunks, smaller bubble.",
       "strategy pipeline or pipeline_ddp", pipelined},
      {"balance", G::pipeline, T::integer_list,
       "one entry per stage, each at least 1, summing to the model's blocks; empty: measured",
       "Blocks of each pipeline stage; empty: rank 0 measures every block and cuts where the "
       "slowest stage is fastest.",
       "strategy pipeline or pipeline_ddp", pipelined},
      {"checkpoint", G::pipeline, T::boolean, "true or false",
       "Keeps only each micro-batch's input and recomputes the stage's forward during backward.",
       "strategy pipeline or pipeline_ddp", pipelined},
      // Freezing
      {"freeze.method", G::freezing, T::choice, "none, fixed or auto",
       "Progressive freezing of the leading blocks: from a fixed schedule, or by AutoFreeze's "
       "gradient-norm test.",
       "", nullptr, choices_of<FreezeMethod>()},
      {"freeze.alpha", G::freezing, T::number, "above 0, at most 1",
       "The largest fraction of the model's blocks AutoFreeze may freeze.", "freeze.method auto",
       autofreeze},
      {"freeze.check_every", G::freezing, T::integer, "a positive integer",
       "Steps between AutoFreeze's gradient-norm checks.", "freeze.method auto", autofreeze},
      {"freeze.tolerance", G::freezing, T::number, "above 0, below 1",
       "A block whose gradient norm moved by less than this fraction since the last check "
       "freezes.",
       "freeze.method auto", autofreeze},
      {"freeze.schedule", G::freezing, T::mapping_list,
       "entries with growing at_step and growing blocks, below the model's blocks",
       "When to freeze how many leading blocks.", "freeze.method fixed", fixed_freeze},
      {"freeze.schedule[].at_step", G::freezing, T::integer, "greater than the previous entry's",
       "The step from which this entry's blocks are frozen.", "freeze.method fixed", fixed_freeze},
      {"freeze.schedule[].blocks", G::freezing, T::integer,
       "more than the previous entry's, fewer than the model's blocks",
       "Leading blocks frozen from at_step on.", "freeze.method fixed", fixed_freeze},
      // Elastic pipeline (PipeTransformer)
      {"elastic.cache", G::freezing, T::boolean, "true or false",
       "AutoCache: the frozen leading blocks' output for each training sample is kept (memory, "
       "then the run folder) and read instead of recomputed; frozen blocks run in evaluation "
       "mode.",
       "freeze.method fixed or auto", freezing},
      {"elastic.cache_mb", G::freezing, T::integer, "a positive integer",
       "Memory in MiB each rank's cache may hold before it writes to the run folder.",
       "elastic.cache true", caching},
      {"elastic.pipe", G::freezing, T::boolean, "true or false (with elastic.dp alike)",
       "AutoPipe: as blocks freeze, the pipeline is halved while the halved one's slowest "
       "stage (frozen blocks at their forward cost) is no slower than the first one's.",
       "strategy pipeline or pipeline_ddp, freeze.method fixed or auto", elastic_pipeline},
      {"elastic.dp", G::freezing, T::boolean, "true or false (with elastic.pipe alike)",
       "AutoDP: the ranks a halved pipeline frees become replicas of new pipelines; the "
       "global batch is re-split over them.",
       "strategy pipeline or pipeline_ddp, freeze.method fixed or auto", elastic_pipeline},
      // Compression
      {"compression.method", G::compression, T::choice, "none, uniform or sort_quant",
       "The codec of activations and gradients crossing pipeline stage boundaries.",
       "strategy pipeline or pipeline_ddp", pipelined, choices_of<CompressionMethod>()},
      {"compression.bits", G::compression, T::integer, "1..16",
       "b: bits of each value within its group.",
       "strategy pipeline or pipeline_ddp, compression.method not none", compressing},
      {"compression.split_bits", G::compression, T::integer, "0..16 (sort_quant only)",
       "s: values are split by rank order into 2^s equal-count groups, each with its own min and "
       "step; \"8 bits, default 3:1\" is bits 6, split_bits 2.",
       "strategy pipeline or pipeline_ddp, compression.method sort_quant", sort_quant},
      // Optimizer and schedule
      {"optimizer.name", G::optimizer, T::choice, "sgd or adamw", "The optimizer.", "", nullptr,
       choices_of<OptimizerKind>()},
      {"optimizer.lr", G::optimizer, T::number, "above 0",
       "The base learning rate, before warm-up and schedule."},
      {"optimizer.momentum", G::optimizer, T::number, "in [0, 1)", "SGD's momentum.",
       "optimizer.name sgd", sgd},
      {"optimizer.weight_decay", G::optimizer, T::number, "0 or above",
       "Weight decay (AdamW's decoupled decay; SGD's L2 term)."},
      {"lr_schedule.name", G::optimizer, T::choice, "constant, step or cosine",
       "How the learning rate moves after warm-up: not, by gamma every step_epochs, or down a "
       "cosine to 0.",
       "", nullptr, choices_of<LrScheduleKind>()},
      {"lr_schedule.warmup_steps", G::optimizer, T::integer, "0 (none) or a positive integer",
       "Steps over which the learning rate rises linearly to optimizer.lr.",
       "lr_schedule.name step or cosine", warms_up},
      {"lr_schedule.step_epochs", G::optimizer, T::integer, "a positive integer",
       "Epochs between two multiplications by gamma.", "lr_schedule.name step", steps},
      {"lr_schedule.gamma", G::optimizer, T::number, "above 0, at most 1",
       "The factor applied every step_epochs epochs.", "lr_schedule.name step", steps},
      // Device and limits
      {"device", G::device, T::choice, "cpu or cuda",
       "Where each rank computes: the CPU, or its own GPU (one per rank; dp drives them all).", "",
       nullptr, choices_of<DeviceKind>()},
      {"precision", G::device, T::choice, "fp32, bf16 or fp16",
       "The forward's compute dtype: fp32, or autocast to bf16 or fp16 with fp32 master weights "
       "(fp16 with a dynamic loss scale); DDP gradients and pipeline boundaries travel in it.",
       "", nullptr, choices_of<Precision>()},
      {"channels_last", G::device, T::boolean, "true or false (CNNs only)",
       "Keeps the CNN's weights and images in NHWC memory order, the layout GPU tensor cores "
       "prefer.",
       "model small_cnn, resnet18, mobilenet_v2 or vgg13", cnn},
      {"threads", G::device, T::integer, "0 or a positive integer",
       "Compute threads of each rank (LibTorch's pool and the BLAS library's); 0 shares the "
       "node's cores among its ranks_per_node ranks, at least 1 each."},
      {"limits.memory_mb", G::device, T::integer, "0 (no limit) or a positive integer",
       "Each rank's memory in MiB: on the CPU its resident memory (its process group's), read "
       "by the agent's supervisor every 50 ms, which kills a rank beyond it; on a GPU the CUDA "
       "allocator's share of the GPU. A rank beyond it ends the run oom."},
      // Checkpoints
      {"save.every_steps", G::experiment, T::integer, "0 (not by steps) or a positive integer",
       "Save the whole training state every this many steps (each rank its part, on its "
       "node); flotilla-train --resume continues from the newest.",
       "", nullptr},
      {"save.every_minutes", G::experiment, T::number, "0 (not by time) or positive",
       "Save the training state after this many minutes since the last save (the ranks "
       "agree on the step). Give every_steps or every_minutes, not both.",
       "", nullptr},
      {"save.keep", G::experiment, T::integer, "a positive integer",
       "How many of the newest checkpoints each rank keeps.",
       "save.every_steps or "
       "save.every_minutes",
       saving},
      {"save.dir", G::experiment, T::text, "a folder",
       "Where checkpoints go; a relative folder is in the run folder on each node.",
       "save.every_steps or save.every_minutes", saving},
      // SLURM
      {"slurm.nodes", G::strategy, T::integer, "0 (not SLURM) or a positive integer",
       "On a SLURM login node (nodes: [LOGIN]): how many of the cluster's nodes the run's job "
       "takes; ranks_per_node ranks run on each."},
      {"slurm.gpus_per_node", G::strategy, T::integer, "0 or a positive integer",
       "GPUs the job asks for on each node (--gres=gpu:N).", "slurm.nodes", slurm_run},
      {"slurm.time", G::strategy, T::text, "minutes, HH:MM:SS or D-HH:MM:SS",
       "The job's time limit (sbatch --time); empty: the partition's default.", "slurm.nodes",
       slurm_run},
      {"slurm.partition", G::strategy, T::text, "a partition name",
       "The partition the job is queued in; empty: the node's, else the cluster's default.",
       "slurm.nodes", slurm_run},
      {"slurm.account", G::strategy, T::text, "an account name",
       "The account the job is charged to; empty: the node's, else the login's default.",
       "slurm.nodes", slurm_run},
      {"slurm.extra", G::strategy, T::name_list, "sbatch options, each --name or --name=value",
       "Further sbatch options (--constraint=a100, --qos=high, --exclusive); those the other "
       "slurm keys set are refused.",
       "slurm.nodes", slurm_run},
      {"stall_timeout_s", G::device, T::integer, "0 (never) or a positive integer",
       "Seconds a rank may write no record before the run ends failed as stalled, naming the "
       "rank and its last step, and its ranks are stopped."},
  };

  const json defaults = default_document();
  std::vector<ConfigKey> table;
  for (const auto& row : rows) {
    ConfigKey key;
    key.key = row.key;
    key.group = row.group;
    key.type = row.type;
    key.choices = row.choices;
    key.allowed = row.allowed;
    key.description = row.description;
    key.applies_when = row.applies_when;
    key.applies = row.applies;
    if (const json* value = at_key(defaults, row.key)) key.default_text = flow_text(*value);
    if (key.key == "vit.preset") key.default_text = "small";
    table.push_back(std::move(key));
  }
  return table;
}

}  // namespace

const std::vector<ConfigGroup>& config_groups() {
  static const std::vector<ConfigGroup> groups = {G::experiment,  G::model,     G::data,
                                                  G::strategy,    G::pipeline,  G::freezing,
                                                  G::compression, G::optimizer, G::device};
  return groups;
}

std::string_view name_of(ConfigGroup group) {
  switch (group) {
    case G::experiment:
      return "Experiment";
    case G::model:
      return "Model";
    case G::data:
      return "Data";
    case G::strategy:
      return "Strategy and placement";
    case G::pipeline:
      return "Pipeline";
    case G::freezing:
      return "Freezing";
    case G::compression:
      return "Compression";
    case G::optimizer:
      return "Optimizer and schedule";
    case G::device:
      return "Device and limits";
  }
  return "?";
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> table = build_table();
  return table;
}

const ConfigKey* find_config_key(std::string_view key) {
  // "freeze.schedule[2].blocks" is the row "freeze.schedule[].blocks".
  std::string normal;
  for (size_t i = 0; i < key.size(); ++i) {
    normal += key[i];
    if (key[i] == '[') {
      const size_t close = key.find(']', i);
      if (close == std::string_view::npos) return nullptr;
      i = close - 1;
    }
  }
  for (const auto& row : config_keys())
    if (row.key == normal) return &row;
  return nullptr;
}

bool key_applies(const ConfigKey& key, const ExperimentConfig& config) {
  return !key.applies || key.applies(config);
}

std::string key_of_message(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos) return {};
  const std::string_view key = message.substr(0, colon);
  return find_config_key(key) ? std::string(key) : std::string();
}

std::vector<ConfigDifference> diff_experiments(const ExperimentConfig& left,
                                               const ExperimentConfig& right) {
  const json a = json::parse(to_json(left));
  const json b = json::parse(to_json(right));
  std::vector<ConfigDifference> out;
  for (const auto& row : config_keys()) {
    if (row.is_list_field()) continue;  // compared as the whole list
    const json* x = at_key(a, row.key);
    const json* y = at_key(b, row.key);
    if (!x && !y) continue;  // not written (vit.preset)
    const std::string left_text = x ? flow_text(*x) : "";
    const std::string right_text = y ? flow_text(*y) : "";
    if (left_text != right_text) out.push_back({row.key, left_text, right_text});
  }
  return out;
}

std::string config_document_from_text(std::string_view text, std::string_view source) {
  json document;
  try {
    document = detail::parse_yaml_or_json(text, source);
  } catch (const std::runtime_error& e) {
    throw ConfigError({e.what()});
  }
  if (document.is_null()) document = json::object();  // an empty document
  if (!document.is_object())
    throw ConfigError(
        {std::string(source) + ": expected a mapping of keys, got " + flow_text(document)});
  return document.dump();
}

std::string config_document_to_yaml(std::string_view json_text) {
  const auto document = nlohmann::ordered_json::parse(json_text, nullptr, false);
  if (document.is_discarded()) return {};
  if (!document.is_object()) return detail::json_to_yaml(document);
  // The table's order, so that the YAML reads group by group as the form
  // does; keys the table does not know follow where they fall.
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& row : config_keys()) {
    if (row.is_list_field()) continue;
    const size_t dot = row.key.find('.');
    const std::string top = row.key.substr(0, dot);
    if (!document.contains(top)) continue;
    const auto& value = document[top];
    if (dot == std::string::npos || !value.is_object()) {
      if (!out.contains(top)) out[top] = value;
      continue;
    }
    const std::string sub = row.key.substr(dot + 1);
    if (!out.contains(top)) out[top] = nlohmann::ordered_json::object();
    if (value.contains(sub)) out[top][sub] = value[sub];
  }
  for (const auto& [key, value] : document.items()) {
    if (!out.contains(key)) {
      out[key] = value;
    } else if (value.is_object() && out[key].is_object()) {
      for (const auto& [sub, item] : value.items())
        if (!out[key].contains(sub)) out[key][sub] = item;
    }
  }
  return detail::json_to_yaml(out);
}

}  // namespace flotilla
