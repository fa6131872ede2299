#pragma once
// The one experiment description shared by every Flotilla program: the GUI
// edits it, the controller stores and plans it, the agent forwards it and the
// engine trains from it. Plain C++ so that engine and agent need neither Qt
// nor each other.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace flotilla {

enum class ModelKind { small_cnn, resnet18, mobilenet_v2, vgg13, vit, transformer_encoder };
enum class DatasetKind { fashion_mnist, mnist, cifar10, cifar100, synthetic };
enum class Strategy { single, dp, ddp, pipeline, pipeline_ddp };
enum class Schedule { gpipe, one_f_one_b };
// What batch_size counts: the samples of each data-parallel replica a step,
// or of all of them together (a seed's "batch" of nn.DataParallel).
enum class BatchScope { per_replica, global };
enum class OptimizerKind { sgd, adamw };
enum class LrScheduleKind { constant, step, cosine };
enum class FreezeMethod { none, fixed, autofreeze };
enum class CompressionMethod { none, uniform, sort_quant };
enum class DeviceKind { cpu, cuda };
// The compute dtype of the forward pass: fp32, or autocast to bf16 or fp16
// with fp32 master weights (fp16 with a dynamic loss scale).
enum class Precision { fp32, bf16, fp16 };

struct OptimizerConfig {
  OptimizerKind name = OptimizerKind::sgd;
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

struct LrScheduleConfig {
  LrScheduleKind name = LrScheduleKind::constant;
  int64_t warmup_steps = 0;
  int64_t step_epochs = 1;  // `step`: multiply by gamma every step_epochs epochs
  double gamma = 0.1;
};

struct FreezeStage {
  int64_t at_step = 0;
  int64_t blocks = 0;  // leading blocks frozen from at_step on
};

struct FreezeConfig {
  FreezeMethod method = FreezeMethod::none;
  double alpha = 0.5;  // autofreeze: fraction of blocks that may freeze at most
  int64_t check_every = 100;
  // autofreeze: a block's gradient norm has "stopped changing" when it moved by
  // less than this fraction since the previous check.
  double tolerance = 0.1;
  std::vector<FreezeStage> schedule;  // fixed
};

// PipeTransformer's elastic pipeline (seed 000). `cache` (AutoCache): the
// frozen prefix's outputs are kept per training sample, in memory up to
// cache_mb and in an unnamed file in the rank's run folder beyond it, and read
// instead of recomputed; a frozen block then runs in evaluation mode (batch
// norm's running statistics, no dropout), so that it is one fixed function of
// its sample. `pipe` and `dp` together (AutoPipe + AutoDP): as the frozen
// prefix grows, the pipeline is halved while the halved one is no slower per
// stage than the first, and the ranks freed become new replicas.
struct ElasticConfig {
  bool pipe = false;
  bool dp = false;
  bool cache = false;
  int64_t cache_mb = 1024;
};

struct CompressionConfig {
  CompressionMethod method = CompressionMethod::none;
  int64_t bits = 6;        // b: value bits within a group
  int64_t split_bits = 2;  // s: 2^s equal-count groups (sort_quant only)
};

struct SyntheticConfig {
  std::vector<int64_t> shape = {3, 32, 32};  // [channels, height, width], or [length] of tokens
  int64_t classes = 10;
  int64_t train_samples = 50000;
  int64_t test_samples = 10000;
  // 0: float samples of `shape`. Above 0: int64 token ids below `vocab`, shape
  // [length], whose label can be learnt from the tokens (see dataset.cpp).
  int64_t vocab = 0;
};

// ViT sizes. The defaults are a small ViT for 28x28 and 32x32 images on a
// CPU; `vit: {preset: b16}` reads as ViT-B/16 (patch 16, dim 768, depth 12,
// heads 12, mlp_dim 3072), with keys given beside it overriding it.
struct VitConfig {
  int64_t patch = 4;  // must divide the image's height and width
  int64_t dim = 128;
  int64_t depth = 6;  // encoder blocks
  int64_t heads = 4;
  int64_t mlp_dim = 256;
};

// Transformer encoder sizes, RoBERTa-base by default.
struct TransformerConfig {
  int64_t vocab = 50265;
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t ffn = 3072;
  // Rows of the position table. RoBERTa numbers positions from 2 (padding
  // index + 1), so 514 rows hold sequences of up to 512 tokens.
  int64_t max_positions = 514;
};

// What each rank may use, so that a CPU node can stand in for a GPU's memory
// and a batch ladder reaches out-of-memory on any machine.
struct LimitsConfig {
  // 0: no limit. Otherwise each rank's memory in MiB: on the CPU its resident
  // memory (its process group's), watched by the agent's supervisor, which
  // SIGKILLs a rank beyond it and ends the run `oom` (agent/src/memory_watchdog.h;
  // not a resource limit, under which OpenBLAS spins on a failed mmap), on
  // CUDA the share of its GPU that LibTorch's caching allocator may hold.
  int64_t memory_mb = 0;
};

// Checkpoints of the whole training state (model, optimizer, loss scale,
// step, epoch, the position in the epoch's data, the random streams), each
// rank its own part, written atomically on its node: every `every_steps`
// steps, or after `every_minutes` minutes (the ranks agree on the step), the
// newest `keep` kept. `flotilla-train --resume` continues from the newest
// step every rank holds. (`checkpoint` is activation recomputation.)
struct SaveConfig {
  int64_t every_steps = 0;     // 0: not by steps
  double every_minutes = 0.0;  // 0: not by time
  int64_t keep = 2;
  std::string dir = "checkpoints";  // relative: to the rank's run folder
  bool enabled() const { return every_steps > 0 || every_minutes > 0; }
};

// A run on a SLURM cluster (nodes: [LOGIN], a node added with --slurm) is
// one job of `nodes` nodes, ranks_per_node ranks on each. Empty fields leave
// the choice to the login node's defaults, then to SLURM's.
struct SlurmConfig {
  int64_t nodes = 0;  // 0: not a SLURM run
  int64_t gpus_per_node = 0;
  std::string time;                // sbatch --time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
  std::string partition;           // "": the node's, else the cluster's default
  std::string account;             // "": the node's, else the login's default
  std::vector<std::string> extra;  // further sbatch options, each "--name" or "--name=value"
  bool enabled() const { return nodes > 0; }
};

// A partition or account name as SLURM takes it, and safe on a command line:
// letters, digits, '.', '_', '-', not starting with a punctuation mark.
bool valid_slurm_name(const std::string& name);

// stall_timeout_s when a config does not say.
inline constexpr int64_t kDefaultStallTimeoutSeconds = 300;

struct ExperimentConfig {
  std::string name = "experiment";
  ModelKind model = ModelKind::small_cnn;
  VitConfig vit;
  TransformerConfig transformer;
  DatasetKind dataset = DatasetKind::fashion_mnist;
  std::string data_dir;  // empty: the data set's default location
  SyntheticConfig synthetic;
  bool augment = true;  // CIFAR: random crop with padding 4 and horizontal flip
  Strategy strategy = Strategy::single;
  Schedule schedule = Schedule::gpipe;
  int64_t ranks_per_node = 1;
  // strategy dp: how many of the node's GPUs DataParallel drives (cuda:0 ..
  // cuda:devices-1); 0: every visible one.
  int64_t devices = 0;
  std::vector<std::string> nodes = {"local"};
  int64_t replicas = 1;  // pipeline_ddp: number of pipeline replicas
  int64_t batch_size = 64;
  BatchScope batch_scope = BatchScope::per_replica;
  int64_t chunks = 1;
  std::vector<int64_t> balance;  // blocks per pipeline stage; empty: automatic
  // pipeline: recompute each stage's forward during backward instead of
  // keeping its activations (torchgpipe's checkpoint="always").
  bool checkpoint = false;
  int64_t epochs = 1;
  int64_t max_steps = 0;    // 0: no limit besides epochs
  double bucket_mb = 25.0;  // ddp: gradient bucket size in MiB (PyTorch DDP's bucket_cap_mb)
  OptimizerConfig optimizer;
  LrScheduleConfig lr_schedule;
  FreezeConfig freeze;
  ElasticConfig elastic;
  CompressionConfig compression;
  DeviceKind device = DeviceKind::cpu;
  Precision precision = Precision::fp32;
  // CNNs: weights and inputs in NHWC memory order (tensor cores' layout).
  bool channels_last = false;
  uint64_t seed = 0;
  int64_t threads = 0;  // per rank: LibTorch's and the BLAS pools; 0: the node's share
  double dropout = 0.0;
  LimitsConfig limits;
  SaveConfig save;
  SlurmConfig slurm;
  // A rank that writes no record for this long is stalled (a collective whose
  // peer is gone, a frozen host, an allocator retrying forever): the agent
  // ends the run failed, naming the rank and its last step. 0: never.
  int64_t stall_timeout_s = kDefaultStallTimeoutSeconds;

  // The nodes the ranks run on: those named, or a SLURM job's allocation.
  int64_t rank_nodes() const {
    return slurm.enabled() ? slurm.nodes : static_cast<int64_t>(nodes.size());
  }
  int64_t world_size() const { return ranks_per_node * rank_nodes(); }
};

// Thrown with every problem found, one "key: what is wrong" line each.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// Parses YAML or JSON text (JSON is read as YAML's flow style) and validates
// it. `source` names the text in messages (a file name, "request", ...).
ExperimentConfig parse_experiment(std::string_view text, std::string_view source = "config");
ExperimentConfig load_experiment(const std::filesystem::path& file);
// parse_experiment that never throws: what could be read (defaults for keys
// missing or unreadable) and, in `problems`, every line parse_experiment would
// throw. For an editor that shows a config while it is still wrong.
ExperimentConfig read_experiment(std::string_view text, std::string_view source,
                                 std::vector<std::string>& problems);

// The structural checks parse_experiment already ran; empty when valid.
std::vector<std::string> validate(const ExperimentConfig& config);

// Files the data set needs that are not there, named in full ("data_dir: ...").
// Separate from validate() because data lives on the node that trains.
std::vector<std::string> missing_data_files(const ExperimentConfig& config);
// missing_data_files, and each file that is there but cannot be read as its
// data set's format (unreadable, an IDX header that its length or its labels
// disagree with, CIFAR files of no whole number of records). From headers and
// sizes only (a gzip file's length is in its trailer): cheap enough for an
// editor, and what a node's agent checks before it starts any rank.
std::vector<std::string> data_file_problems(const ExperimentConfig& config);
std::filesystem::path resolved_data_dir(const ExperimentConfig& config);

// The files a data set reads, in its data_dir: for IDX data sets [images,
// labels] of each split (NAME or NAME.gz), for CIFAR each split's record files.
struct DataFiles {
  std::vector<std::filesystem::path> train, test;
};
DataFiles data_files(const ExperimentConfig& config);

std::string to_json(const ExperimentConfig& config, int indent = 2);
std::string to_yaml(const ExperimentConfig& config);

// A comma-separated list as a person types it ("a, b,,c"): each entry trimmed
// of white space, empty entries dropped. The CLI's --nodes and the window's
// Nodes field read alike through it.
std::vector<std::string> split_list(std::string_view text);
// The reverse: "a,b,c".
std::string join_list(const std::vector<std::string>& entries);

// The convolutional networks, which `channels_last` applies to.
bool is_cnn(ModelKind model);

// Number of cuttable blocks of the configured model: what `balance` sums to.
int64_t model_block_count(const ExperimentConfig& config);

std::string_view name_of(ModelKind v);
std::string_view name_of(DatasetKind v);
std::string_view name_of(Strategy v);
std::string_view name_of(Schedule v);
std::string_view name_of(BatchScope v);
std::string_view name_of(OptimizerKind v);
std::string_view name_of(LrScheduleKind v);
std::string_view name_of(FreezeMethod v);
std::string_view name_of(CompressionMethod v);
std::string_view name_of(DeviceKind v);
std::string_view name_of(Precision v);

}  // namespace flotilla
