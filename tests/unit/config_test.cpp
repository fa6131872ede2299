#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "flotilla/protocol/experiment_config.h"
#include "flotilla/protocol/rank_placement.h"
#include "temp_dir.h"

namespace flotilla {
namespace {

const char* kValid = R"(
name: test
model: small_cnn
dataset: synthetic
synthetic: {shape: [1, 28, 28], classes: 10, train_samples: 64, test_samples: 16}
batch_size: 16
)";

// Parses kValid with `override_yaml` merged over it (later keys win in a flow map).
std::vector<std::string> problems_of(const std::string& yaml) {
  try {
    parse_experiment(yaml, "test.yaml");
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

std::string merged(const std::string& override_yaml) {
  // Later duplicate keys are not allowed in YAML, so drop the valid config's
  // lines that the override replaces.
  std::string out;
  std::istringstream base(kValid);
  std::string line;
  std::string over = std::string("\n") + override_yaml;
  while (std::getline(base, line)) {
    auto colon = line.find(':');
    if (colon != std::string::npos &&
        over.find("\n" + line.substr(0, colon + 1)) != std::string::npos)
      continue;
    out += line + "\n";
  }
  return out + override_yaml + "\n";
}

struct BadConfig {
  const char* yaml;
  const char* message;
};

void PrintTo(const BadConfig& c, std::ostream* out) {
  *out << "{" << c.yaml << "}";
}

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, IsRejectedWithExactMessage) {
  const auto problems = problems_of(merged(GetParam().yaml));
  ASSERT_EQ(problems.size(), 1u) << GetParam().yaml << "\n" << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0], GetParam().message);
}

const BadConfig kBadConfigs[] = {
    {"model: resnet50",
     "model: unknown value \"resnet50\"; allowed: small_cnn, resnet18, mobilenet_v2, vgg13, vit, "
     "transformer_encoder"},
    {"dataset: imagenet",
     "dataset: unknown value \"imagenet\"; allowed: fashion_mnist, mnist, cifar10, cifar100, "
     "synthetic"},
    {"strategy: fsdp",
     "strategy: unknown value \"fsdp\"; allowed: single, dp, ddp, pipeline, pipeline_ddp"},
    {"strategy: pipeline\nranks_per_node: 2\nschedule: interleaved",
     "schedule: unknown value \"interleaved\"; allowed: gpipe, 1f1b"},
    {"batch_size: 0", "batch_size: must be a positive integer, got 0"},
    {"batch_size: -3", "batch_size: must be a positive integer, got -3"},
    {"batch_size: many", "batch_size: expected an integer, got \"many\""},
    {"batch_size: 12.5", "batch_size: expected an integer, got 12.5"},
    {"epochs: 0", "epochs: must be a positive integer, got 0"},
    {"max_steps: -1", "max_steps: must be 0 (no limit) or positive, got -1"},
    {"bucket_mb: 0", "bucket_mb: must be above 0 and at most 4096 (MiB), got 0.0"},
    {"strategy: pipeline\nranks_per_node: 2\nbatch_size: 8\nchunks: 16",
     "chunks: must not exceed batch_size (8), got 16"},
    {"save: {every_steps: 10, every_minutes: 5}",
     "save: every_steps and every_minutes are both set; give one of them"},
    {"save: {every_steps: -1}", "save.every_steps: must be 0 (not by steps) or positive, got -1"},
    {"slurm: {time: \"01:00:00\"}",
     "slurm.nodes: must be a positive number of nodes for the other slurm keys to apply, got 0"},
    {"slurm: {nodes: 1, time: \"1h\"}",
     "slurm.time: expected a SLURM time limit (minutes, HH:MM:SS or D-HH:MM:SS), got \"1h\""},
    {"slurm: {nodes: 1, partition: \"gpu;rm\"}",
     "slurm.partition: expected a partition name, got \"gpu;rm\""},
    {"slurm: {nodes: 1, extra: [\"--qos high\"]}",
     "slurm.extra[0]: expected one sbatch option as --name or --name=value, got \"--qos high\""},
    {"slurm: {nodes: 1, extra: [\"--time=10\"]}",
     "slurm.extra[0]: --time is set by Flotilla from the config (slurm.nodes, gpus_per_node, time, "
     "partition, account); give it there"},
    {"slurm: {nodes: -1}", "slurm.nodes: must be 0 (not a SLURM run) or positive, got -1"},
    {"save: {every_minutes: 2, keep: 0}", "save.keep: must be a positive integer, got 0"},
    {"save: {every_steps: 5, dir: \"\"}",
     "save.dir: must name a folder (relative to the run folder), got \"\""},
    {"batch_scope: everyone",
     "batch_scope: unknown value \"everyone\"; allowed: per_replica, global"},
    {"strategy: ddp\nranks_per_node: 3\nbatch_scope: global\nbatch_size: 16",
     "batch_size: with batch_scope global is split evenly among the 3 data-parallel replicas: "
     "give a multiple of 3, got 16"},
    {"strategy: pipeline_ddp\nranks_per_node: 4\nreplicas: 2\nbatch_scope: global\nbatch_size: "
     "8\nchunks: 8",
     "chunks: must not exceed each replica's batch (4), got 8"},
    {"chunks: 4",
     "chunks: only pipeline strategies split a batch into micro-batches; got 4 with "
     "strategy \"single\""},
    {"strategy: pipeline\nranks_per_node: 2\nbalance: [1, 2]",
     "balance: must sum to the 4 blocks of model \"small_cnn\", got [1, 2] (sum 3)"},
    {"strategy: pipeline\nranks_per_node: 2\nbalance: [1, 1, 2]",
     "balance: needs one entry per pipeline stage (2), got 3"},
    {"strategy: pipeline\nranks_per_node: 2\nbalance: [0, 4]",
     "balance: every stage needs at least 1 block, got [0, 4]"},
    {"strategy: pipeline",
     "strategy: \"pipeline\" needs at least 2 stages per pipeline, got 1 (1 "
     "ranks / 1 replicas)"},
    {"strategy: pipeline\nranks_per_node: 5",
     "strategy: \"pipeline\" cuts model \"small_cnn\" at its block boundaries into 4 stages at "
     "most, got 5 (5 ranks / 1 replicas)"},
    {"strategy: pipeline_ddp\nranks_per_node: 3\nreplicas: 2",
     "replicas: must divide the 3 ranks (ranks_per_node x nodes), got 2"},
    {"ranks_per_node: 2",
     "strategy: \"single\" trains on one rank, but ranks_per_node x nodes is 2"},
    {"strategy: dp",
     "strategy: \"dp\" drives several GPUs from one process and needs device \"cuda\""},
    {"strategy: dp\ndevice: cuda\nranks_per_node: 2",
     "strategy: \"dp\" is one process driving every GPU of its node, but ranks_per_node x nodes "
     "is 2"},
    {"strategy: dp\ndevice: cuda\ndevices: -1",
     "devices: must be 0 (every visible GPU) or a positive count, got -1"},
    {"strategy: ddp\nranks_per_node: 2\ndevices: 2",
     "devices: is how many GPUs strategy dp's one process drives; with strategy \"ddp\" each "
     "rank has one (ranks_per_node)"},
    {"checkpoint: true", "checkpoint: recomputes pipeline stages; strategy \"single\" has none"},
    {"freeze: {method: auto, tolerance: 0}",
     "freeze.tolerance: must be above 0 and below 1, got 0.0"},
    {"nodes: [a, a]\nstrategy: ddp", "nodes: lists \"a\" twice"},
    {"optimizer: {name: lamb}", "optimizer.name: unknown value \"lamb\"; allowed: sgd, adamw"},
    {"optimizer: {lr: 0}", "optimizer.lr: must be positive, got 0.0"},
    {"optimizer: {momentum: 1.5}", "optimizer.momentum: must be in [0, 1), got 1.5"},
    {"optimizer: sgd", "optimizer: expected a mapping of keys, got \"sgd\""},
    {"optimiser: {lr: 0.1}",
     "optimiser: unknown key; allowed: augment, balance, batch_scope, batch_size, bucket_mb, "
     "channels_last, "
     "checkpoint, chunks, compression, data_dir, dataset, device, devices, dropout, elastic, epochs, "
     "freeze, "
     "limits, lr_schedule, max_steps, model, name, nodes, optimizer, precision, ranks_per_node, "
     "replicas, save, schedule, seed, slurm, stall_timeout_s, strategy, synthetic, threads, "
     "transformer, "
     "vit"},
    {"dropout: 1.0", "dropout: must be in [0, 1), got 1"},
    {"limits: {memory_mb: -1}", "limits.memory_mb: must be 0 (no limit) or positive, got -1"},
    {"limits: {memory_mb: 1.5}", "limits.memory_mb: expected an integer, got 1.5"},
    {"limits: {memory_gb: 2}", "limits.memory_gb: unknown key; allowed: memory_mb"},
    {"stall_timeout_s: -5", "stall_timeout_s: must be 0 (never) or positive, got -5"},
    {"stall_timeout_s: 2.5", "stall_timeout_s: expected an integer, got 2.5"},
    {"device: tpu", "device: unknown value \"tpu\"; allowed: cpu, cuda"},
    {"precision: fp8", "precision: unknown value \"fp8\"; allowed: fp32, bf16, fp16"},
    {"precision: 16", "precision: expected one of fp32, bf16, fp16, got 16"},
    {"channels_last: yes please", "channels_last: expected true or false, got \"yes please\""},
    {"model: vit\nchannels_last: true",
     "channels_last: applies to the CNNs (small_cnn, resnet18, mobilenet_v2, vgg13); model "
     "\"vit\" has no NHWC layout"},
    {"seed: -1", "seed: expected a non-negative integer, got -1"},
    {"threads: -2",
     "threads: must be 0 (the node's cores shared among its ranks) or positive, got -2"},
    {"synthetic: {shape: [3, 0, 32]}",
     "synthetic.shape: must be [channels, height, width] or [length] with positive sizes, got [3, "
     "0, 32]"},
    {"compression: {method: sort_quant}",
     "compression.method: \"sort_quant\" compresses activations between pipeline stages; strategy "
     "\"single\" has none"},
    {"strategy: pipeline\nranks_per_node: 2\ncompression: {method: sort_quant, bits: 20}",
     "compression.bits: must be in 1..16, got 20"},
    {"freeze: {method: fixed}",
     "freeze.schedule: method \"fixed\" needs at least one {at_step, blocks} entry"},
    {"freeze: {method: fixed, schedule: [{at_step: 10, blocks: 4}]}",
     "freeze.schedule[0].blocks: must grow from the previous entry's 0 and stay below the 4 blocks "
     "of the model, got 4"},
    {"name: \"a\\_b\"",
     "test.yaml: a quoted scalar's escape (YAML's \\_ for one) gives bytes that are not UTF-8 "
     "text; "
     "write the character itself"},
    {"elastic: {cache: true}",
     "elastic.cache: caches the outputs of the frozen leading blocks, but freeze.method is none: "
     "nothing ever freezes; set freeze.method fixed or auto"},
    {"dataset: cifar10\nfreeze: {method: auto}\nelastic: {cache: true}",
     "elastic.cache: a randomly augmented sample's frozen-prefix output differs every epoch, so it "
     "cannot be cached; set augment false"},
    {"freeze: {method: auto}\nelastic: {cache: true, cache_mb: 0}",
     "elastic.cache_mb: must be a positive integer, got 0"},
    {"strategy: pipeline\nranks_per_node: 2\nfreeze: {method: auto}\nelastic: {pipe: true}",
     "elastic.dp: AutoPipe (elastic.pipe) halves the pipeline and AutoDP (elastic.dp) makes the "
     "ranks it frees new replicas; one without the other leaves ranks idle: set both true"},
    {"freeze: {method: auto}\nelastic: {pipe: true, dp: true}",
     "elastic.pipe: re-cuts a pipeline as blocks freeze and needs strategy pipeline or "
     "pipeline_ddp, got \"single\""},
    {"strategy: pipeline\nranks_per_node: 2\nelastic: {pipe: true, dp: true}",
     "elastic.pipe: re-cuts the pipeline as its leading blocks freeze, but freeze.method is none: "
     "set freeze.method fixed or auto"},
    {"strategy: pipeline\nranks_per_node: 2\nfreeze: {method: auto}\nsave: {every_steps: 5}\n"
     "elastic: {pipe: true, dp: true}",
     "elastic.pipe: cannot be saved yet: a checkpoint holds one layout's stage; leave save unset"},
    {"strategy: pipeline_ddp\nranks_per_node: 4\nreplicas: 2\nbatch_size: 5\n"
     "freeze: {method: auto}\nelastic: {pipe: true, dp: true}",
     "batch_size: is re-split as an elastic pipeline gains replicas, up to one per rank: the "
     "global batch (10) must be a multiple of the 4 ranks"},
    {"elastic: {cache: yes please}", "elastic.cache: expected true or false, got \"yes please\""},
    {"lr_schedule: {name: cosine, gamma: 2}", "lr_schedule.gamma: must be in [0, 1], got 2"},
    {"name: ''", "name: must not be empty"},
    {"synthetic: {vocab: -1}",
     "synthetic.vocab: must be 0 (float samples) or positive (token ids), got -1"},
    {"synthetic: {shape: [64]}",
     "model: \"small_cnn\" takes images [channels, height, width], got synthetic.shape [64]"},
    {"synthetic: {shape: [64], vocab: 1000}",
     "model: \"small_cnn\" takes images, but synthetic.vocab 1000 makes token sequences"},
    {"model: vit\nvit: {patch: 8}",
     "vit.patch: must divide the 28x28 images of dataset \"synthetic\", got 8"},
    {"model: vit\ndataset: fashion_mnist\nvit: {preset: b16}",
     "vit.patch: must divide the 28x28 images of dataset \"fashion_mnist\", got 16"},
    {"model: vit\ndataset: cifar100\nvit: {patch: 6}",
     "vit.patch: must divide the 32x32 images of dataset \"cifar100\", got 6"},
    {"model: vit\nvit: {heads: 5}", "vit.heads: must divide vit.dim (128), got 5"},
    {"model: vit\nvit: {depth: 0}", "vit.depth: must be a positive integer, got 0"},
    {"model: vit\nvit: {preset: l16}", "vit.preset: unknown value \"l16\"; allowed: small, b16"},
    {"model: vit\nvit: {width: 3}",
     "vit.width: unknown key; allowed: depth, dim, heads, mlp_dim, patch, preset"},
    {"model: vit\nstrategy: pipeline\nranks_per_node: 2\nbalance: [4, 5]",
     "balance: must sum to the 8 blocks of model \"vit\", got [4, 5] (sum 9)"},
    {"model: transformer_encoder",
     "model: \"transformer_encoder\" reads token ids: needs synthetic.vocab > 0, got float "
     "samples of synthetic.shape [1, 28, 28]"},
    {"model: transformer_encoder\ndataset: fashion_mnist",
     "model: \"transformer_encoder\" reads token ids: needs dataset \"synthetic\" with "
     "synthetic.vocab > 0, got dataset \"fashion_mnist\""},
    {"model: transformer_encoder\nsynthetic: {shape: [3, 8, 8], vocab: 100}",
     "synthetic.shape: token sequences (synthetic.vocab > 0) are [length] with a length of at "
     "least 2, got [3, 8, 8]"},
    {"model: transformer_encoder\nsynthetic: {shape: [64], vocab: 5}",
     "synthetic.vocab: must hold a start token, one keyword per class and filler (12 for 10 "
     "classes), got 5"},
    {"model: transformer_encoder\nsynthetic: {shape: [64], vocab: 100}\ntransformer: {vocab: 50}",
     "transformer.vocab: must cover the token ids of synthetic.vocab (100), got 50"},
    {"model: transformer_encoder\nsynthetic: {shape: [600], vocab: 100}",
     "transformer.max_positions: must be at least the sequence length + 2 (positions count from "
     "2, as in RoBERTa): 602 for synthetic.shape [600], got 514"},
    {"model: transformer_encoder\nsynthetic: {shape: [64], vocab: 100}\ntransformer: {hidden: "
     "100}",
     "transformer.heads: must divide transformer.hidden (100), got 12"},
    {"model: transformer_encoder\nsynthetic: {shape: [64], vocab: 100}\ntransformer: {layers: "
     "-1}",
     "transformer.layers: must be a positive integer, got -1"},
};

// Test names a person can read in ctest's output: the entry's number and the
// field its message names ("07_optimizer_lr").
std::string bad_config_name(const ::testing::TestParamInfo<BadConfig>& info) {
  std::string field(info.param.message, std::strcspn(info.param.message, ":"));
  for (auto& c : field)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return (info.index < 10 ? "0" : "") + std::to_string(info.index) + "_" + field;
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfigTest, ::testing::ValuesIn(kBadConfigs), bad_config_name);

// A SLURM run names its login node alone; its ranks run on the job's nodes.
TEST(ExperimentConfig, ASlurmRunsWorldIsRanksPerNodeTimesTheJobsNodes) {
  std::vector<std::string> unread;
  const auto config = read_experiment(
      "strategy: ddp\nnodes: [hpc]\nranks_per_node: 2\nslurm: {nodes: 3}\n", "t.yaml", unread);
  EXPECT_EQ(config.rank_nodes(), 3);
  EXPECT_EQ(config.world_size(), 6);
  const auto last = place_rank(config, 5);
  EXPECT_EQ(last.node, "hpc");  // reached through the login node
  EXPECT_EQ(last.node_index, 2);
  EXPECT_EQ(last.local_rank, 1);
  std::vector<std::string> unread_too;
  const auto ssh =
      read_experiment("strategy: ddp\nnodes: [a, b]\nranks_per_node: 2\n", "t.yaml", unread_too);
  EXPECT_EQ(ssh.world_size(), 4);
  EXPECT_EQ(place_rank(ssh, 3).node, "b");
}

TEST(ExperimentConfig, ReportsEveryProblemAtOnce) {
  const auto problems = problems_of(merged("batch_size: 0\nepochs: 0\nmodel: lenet"));
  ASSERT_EQ(problems.size(), 1u) << "type errors stop before value checks";
  EXPECT_EQ(problems[0].rfind("model: unknown value", 0), 0u);
  const auto values = problems_of(merged("batch_size: 0\nepochs: 0"));
  EXPECT_EQ(values, (std::vector<std::string>{"batch_size: must be a positive integer, got 0",
                                              "epochs: must be a positive integer, got 0"}));
}

TEST(ExperimentConfig, SyntaxErrorNamesSourceAndLine) {
  const auto problems = problems_of("name: a\nmodel: [small_cnn\n");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("test.yaml: line ", 0), 0u) << problems[0];
}

// Found by fuzzing: yaml-cpp passes bytes that are not UTF-8 through, and
// nlohmann then threw from dump() while a message quoted them.
TEST(ExperimentConfig, TextThatIsNotUtf8IsRefusedNamingLineAndColumn) {
  EXPECT_EQ(problems_of("name: a\nmodel: small_cnn\ndataset: fashion\xC3_mnist\n"),
            std::vector<std::string>{"test.yaml: line 3, column 17: not UTF-8 text (byte 0xc3)"});
  EXPECT_EQ(problems_of("name: \xED\xA0\x80\n"),  // a UTF-16 surrogate, not a character
            std::vector<std::string>{"test.yaml: line 1, column 7: not UTF-8 text (byte 0xed)"});
  EXPECT_EQ(parse_experiment("name: caf\xC3\xA9\n", "test.yaml").name, "caf\xC3\xA9");
}

// yaml-cpp reads text that starts "\x01\0\0\0" as UTF-32LE and turned the
// rest into bytes that are not UTF-8, which nlohmann threw on (fuzzing:
// tests/fuzz/corpus/config/crash-nul-reads-as-utf32).
TEST(ExperimentConfig, TextHoldingANulIsRefusedNamingLineAndColumn) {
  EXPECT_EQ(problems_of(std::string("\x01\0\0\0synthetic\nname: a\n", 22)),
            std::vector<std::string>{
                "test.yaml: line 1, column 2: a NUL byte, which YAML and JSON text cannot hold"});
  EXPECT_EQ(problems_of(std::string("name: a\nmodel: small\0cnn\n", 25)),
            std::vector<std::string>{
                "test.yaml: line 2, column 13: a NUL byte, which YAML and JSON text cannot hold"});
}

TEST(ExperimentConfig, TopLevelMustBeAMapping) {
  EXPECT_EQ(problems_of("- a\n- b\n"),
            std::vector<std::string>{"test.yaml: expected a mapping of keys, got [\"a\",\"b\"]"});
}

TEST(ExperimentConfig, QuotedNumbersStayText) {
  EXPECT_EQ(problems_of(merged("batch_size: \"16\"")),
            std::vector<std::string>{"batch_size: expected an integer, got \"16\""});
}

TEST(ExperimentConfig, JsonAndYamlReadTheSame) {
  const auto from_yaml = parse_experiment(kValid);
  const auto from_json = parse_experiment(to_json(from_yaml), "run.json");
  EXPECT_EQ(to_json(from_json), to_json(from_yaml));
  EXPECT_EQ(from_json.batch_size, 16);
  EXPECT_EQ(from_json.synthetic.shape, (std::vector<int64_t>{1, 28, 28}));
}

TEST(ExperimentConfig, YamlExportRoundTrips) {
  auto config = parse_experiment(kValid);
  config.name = "true";  // text that would read back as a boolean if left unquoted
  config.optimizer.lr = 0.125;
  const auto again = parse_experiment(to_yaml(config), "export.yaml");
  EXPECT_EQ(to_json(again), to_json(config));
}

// yaml-cpp wrote a name ending in ":\r" unquoted, which then read as a map
// (fuzzing: tests/fuzz/corpus/config/crash-colon-before-carriage-return).
TEST(ExperimentConfig, YamlExportOfANameWithControlCharactersRoundTrips) {
  for (const std::string name : {"run:\r", "run:\n", "a:\rb", "tab\there", "bell\x07", "del\x7f"}) {
    SCOPED_TRACE(nlohmann::json(name).dump());
    auto config = parse_experiment(kValid);
    config.name = name;
    EXPECT_EQ(parse_experiment(to_yaml(config), "export.yaml").name, name) << to_yaml(config);
  }
}

TEST(ExperimentConfig, MemoryLimitIsReadExportedAndOffByDefault) {
  EXPECT_EQ(parse_experiment(kValid).limits.memory_mb, 0);
  const auto c = parse_experiment(merged("limits: {memory_mb: 768}"), "limited.yaml");
  EXPECT_EQ(c.limits.memory_mb, 768);
  EXPECT_NE(to_yaml(c).find("memory_mb: 768"), std::string::npos) << to_yaml(c);
  EXPECT_EQ(parse_experiment(to_yaml(c), "export.yaml").limits.memory_mb, 768);
  EXPECT_EQ(parse_experiment(to_json(c), "export.json").limits.memory_mb, 768);
}

TEST(ExperimentConfig, StallTimeoutDefaultsToFiveMinutesAndRoundTrips) {
  EXPECT_EQ(parse_experiment(kValid).stall_timeout_s, 300);
  const auto c = parse_experiment(merged("stall_timeout_s: 20"), "stall.yaml");
  EXPECT_EQ(c.stall_timeout_s, 20);
  EXPECT_EQ(parse_experiment(to_yaml(c), "export.yaml").stall_timeout_s, 20);
  EXPECT_EQ(parse_experiment(to_json(c), "export.json").stall_timeout_s, 20);
  EXPECT_EQ(parse_experiment(merged("stall_timeout_s: 0"), "off.yaml").stall_timeout_s, 0);
}

TEST(ExperimentConfig, PrecisionAndChannelsLastDefaultToFp32NchwAndRoundTrip) {
  const auto plain = parse_experiment(kValid);
  EXPECT_EQ(plain.precision, Precision::fp32);
  EXPECT_FALSE(plain.channels_last);
  const auto c = parse_experiment(merged("precision: bf16\nchannels_last: true"), "bf16.yaml");
  EXPECT_EQ(c.precision, Precision::bf16);
  EXPECT_TRUE(c.channels_last);
  EXPECT_NE(to_yaml(c).find("precision: bf16"), std::string::npos) << to_yaml(c);
  for (const auto& text : {to_yaml(c), to_json(c)}) {
    const auto back = parse_experiment(text, "export");
    EXPECT_EQ(back.precision, Precision::bf16);
    EXPECT_TRUE(back.channels_last);
  }
  // fp16 on the CPU is valid as a config: whether this LibTorch can is the
  // engine's answer when the rank starts.
  EXPECT_EQ(parse_experiment(merged("precision: fp16"), "fp16.yaml").precision, Precision::fp16);
  EXPECT_EQ(name_of(Precision::fp16), "fp16");
}

TEST(ExperimentConfig, NewModelSectionsDefaultToSmallVitAndRobertaBase) {
  const ExperimentConfig c;
  EXPECT_EQ(c.vit.patch, 4);
  EXPECT_EQ(c.vit.dim, 128);
  EXPECT_EQ(c.vit.depth, 6);
  EXPECT_EQ(c.vit.heads, 4);
  EXPECT_EQ(c.vit.mlp_dim, 256);
  const auto& t = c.transformer;
  EXPECT_EQ(t.vocab, 50265);
  EXPECT_EQ(t.hidden, 768);
  EXPECT_EQ(t.layers, 12);
  EXPECT_EQ(t.heads, 12);
  EXPECT_EQ(t.ffn, 3072);
  EXPECT_EQ(t.max_positions, 514);
  EXPECT_EQ(c.synthetic.vocab, 0);
  EXPECT_EQ(model_block_count([] {
              ExperimentConfig r;
              r.model = ModelKind::transformer_encoder;
              return r;
            }()),
            14);
}

TEST(ExperimentConfig, VitPresetB16GivesVitB16SizesThatKeysOverride) {
  const char* b16 = "name: v\nmodel: vit\ndataset: synthetic\nsynthetic: {shape: [3, 224, 224]}\n";
  const auto c = parse_experiment(std::string(b16) + "vit: {preset: b16}\n");
  EXPECT_EQ(c.vit.patch, 16);
  EXPECT_EQ(c.vit.dim, 768);
  EXPECT_EQ(c.vit.depth, 12);
  EXPECT_EQ(c.vit.heads, 12);
  EXPECT_EQ(c.vit.mlp_dim, 3072);
  EXPECT_EQ(model_block_count(c), 14);
  const auto shallow = parse_experiment(std::string(b16) + "vit: {depth: 2, preset: b16}\n");
  EXPECT_EQ(shallow.vit.depth, 2);
  EXPECT_EQ(shallow.vit.dim, 768);
  EXPECT_EQ(model_block_count(shallow), 4);
  // The preset is read, not kept: an export names the sizes and reads back the same.
  EXPECT_EQ(to_json(c).find("preset"), std::string::npos);
  EXPECT_EQ(to_json(parse_experiment(to_yaml(c), "export.yaml")), to_json(c));
  EXPECT_EQ(parse_experiment(std::string(b16) + "vit: {preset: small}\n").vit.dim, 128);
}

TEST(ExperimentConfig, TransformerAndTokenKeysRoundTrip) {
  const auto c = parse_experiment(R"(
name: tokens
model: transformer_encoder
transformer: {vocab: 1000, hidden: 64, layers: 3, heads: 4, ffn: 128, max_positions: 130}
dataset: synthetic
synthetic: {shape: [128], vocab: 1000, classes: 2}
)");
  EXPECT_EQ(c.synthetic.vocab, 1000);
  EXPECT_EQ(c.transformer.layers, 3);
  EXPECT_EQ(c.transformer.max_positions, 130);
  EXPECT_EQ(model_block_count(c), 5);
  EXPECT_EQ(to_json(parse_experiment(to_json(c), "run.json")), to_json(c));
  EXPECT_EQ(to_json(parse_experiment(to_yaml(c), "export.yaml")), to_json(c));
}

TEST(ExperimentConfig, EveryPresetIsValid) {
  int presets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(FLOTILLA_PRESETS_DIR)) {
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_experiment(entry.path()));
    ++presets;
  }
  EXPECT_GE(presets, 3);
}

TEST(ExperimentConfig, MissingFileIsNamed) {
  try {
    load_experiment("/nonexistent/run.yaml");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/run.yaml: cannot read the file");
  }
}

TEST(DataFiles, NamesEveryMissingFile) {
  auto config = parse_experiment(merged("dataset: cifar100\ndata_dir: /nonexistent"));
  EXPECT_EQ(missing_data_files(config),
            std::vector<std::string>{
                "data_dir: \"/nonexistent\" is not a directory (dataset \"cifar100\")"});
  testing::TempDir temp;
  const auto& dir = temp.path();
  std::ofstream(dir / "train.bin") << "x";
  config.data_dir = dir.string();
  EXPECT_EQ(missing_data_files(config),
            std::vector<std::string>{"data_dir: missing \"" + (dir / "test.bin").string() +
                                     "\" for dataset \"cifar100\""});
  config.dataset = DatasetKind::mnist;
  config.data_dir.clear();
  EXPECT_EQ(missing_data_files(config),
            std::vector<std::string>{"data_dir: dataset \"mnist\" needs a data_dir"});
}

TEST(DataFiles, SyntheticNeedsNone) {
  EXPECT_TRUE(missing_data_files(parse_experiment(kValid)).empty());
}

// An IDX file of unsigned bytes: its header promises `shape`, `data_bytes` follow.
std::string idx_bytes(const std::vector<uint32_t>& shape, size_t data_bytes) {
  std::string bytes{'\0', '\0', '\x08', static_cast<char>(shape.size())};
  for (uint32_t d : shape)
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((d >> shift) & 0xff);
  return bytes + std::string(data_bytes, '\x01');
}

void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary) << bytes;
}

TEST(DataFiles, TheInstalledFashionMnistIsUsable) {
  // Real gzipped IDX files (dataset-fashion-mnist, installed by setup.sh):
  // their lengths come from the gzip trailers and agree with their headers.
  auto config = parse_experiment(merged("dataset: fashion_mnist"));
  EXPECT_EQ(data_file_problems(config), std::vector<std::string>{});
}

TEST(DataFiles, NamesIdxFilesWhoseHeaderLengthOrLabelsDisagree) {
  testing::TempDir temp;
  const auto& dir = temp.path();
  write_bytes(dir / "train-images-idx3-ubyte", idx_bytes({3, 28, 28}, 3 * 28 * 28));
  write_bytes(dir / "train-labels-idx1-ubyte", idx_bytes({3}, 3));
  write_bytes(dir / "t10k-images-idx3-ubyte", idx_bytes({2, 28, 28}, 2 * 28 * 28));
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes({2}, 2));
  auto config = parse_experiment(merged("dataset: mnist\ndata_dir: " + dir.string()));
  EXPECT_EQ(data_file_problems(config), std::vector<std::string>{});

  write_bytes(dir / "train-images-idx3-ubyte", idx_bytes({3, 28, 28}, 2 * 28 * 28));  // cut short
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes({5}, 5));
  EXPECT_EQ(data_file_problems(config),
            (std::vector<std::string>{
                "data_dir: \"" + (dir / "train-images-idx3-ubyte").string() +
                    "\" holds 1584 bytes, its IDX header promises 2368 (dataset \"mnist\")",
                "data_dir: \"" + (dir / "t10k-labels-idx1-ubyte").string() +
                    "\" has 5 labels for the 2 images of \"" +
                    (dir / "t10k-images-idx3-ubyte").string() + "\" (dataset \"mnist\")"}));

  write_bytes(dir / "train-images-idx3-ubyte", "<html>not found</html>");
  write_bytes(dir / "t10k-labels-idx1-ubyte", idx_bytes({2}, 2));
  EXPECT_EQ(
      data_file_problems(config),
      std::vector<std::string>{"data_dir: \"" + (dir / "train-images-idx3-ubyte").string() +
                               "\" is not an IDX file of unsigned bytes (dataset \"mnist\")"});
}

TEST(DataFiles, NamesAGzippedIdxFileCutShort) {
  testing::TempDir temp;
  const auto& dir = temp.path();
  const std::filesystem::path installed = "/usr/share/datasets/fashion-mnist";
  for (const auto* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    std::filesystem::copy_file(installed / name, dir / name);
  auto config = parse_experiment(merged("dataset: fashion_mnist\ndata_dir: " + dir.string()));
  EXPECT_EQ(data_file_problems(config), std::vector<std::string>{});
  // An interrupted copy: the first half of the file, its gzip trailer gone.
  const auto cut = dir / "t10k-images-idx3-ubyte.gz";
  std::filesystem::resize_file(cut, std::filesystem::file_size(cut) / 2);
  const auto problems = data_file_problems(config);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rfind("data_dir: \"" + cut.string() + "\" holds ", 0), 0u) << problems[0];
  EXPECT_NE(problems[0].find(" uncompressed, its IDX header promises 7840016 (dataset "
                             "\"fashion_mnist\")"),
            std::string::npos)
      << problems[0];
}

TEST(DataFiles, NamesCifarFilesOfNoWholeNumberOfRecords) {
  testing::TempDir temp;
  const auto& dir = temp.path();
  write_bytes(dir / "train.bin", std::string(2 * 3074, '\x02'));
  write_bytes(dir / "test.bin", std::string(3074, '\x02'));
  auto config = parse_experiment(merged("dataset: cifar100\ndata_dir: " + dir.string()));
  EXPECT_EQ(data_file_problems(config), std::vector<std::string>{});
  write_bytes(dir / "test.bin", std::string(3073, '\x02'));  // a CIFAR-10 record
  EXPECT_EQ(data_file_problems(config),
            std::vector<std::string>{"data_dir: \"" + (dir / "test.bin").string() +
                                     "\" holds 3073 bytes, not a whole number of 3074-byte CIFAR "
                                     "records (dataset \"cifar100\")"});
  std::filesystem::remove(dir / "test.bin");
  EXPECT_EQ(data_file_problems(config), missing_data_files(config));
}

}  // namespace
}  // namespace flotilla
