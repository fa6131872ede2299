#include "flotilla/protocol/experiment_config.h"

#include <fstream>
#include <sstream>

#include "field_reader.h"
#include "yaml_json.h"

namespace flotilla {
namespace {

using detail::FieldReader;
using nlohmann::json;

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

void read_synthetic(FieldReader& r, SyntheticConfig& s) {
  r.read("shape", s.shape);
  r.read("classes", s.classes);
  r.read("train_samples", s.train_samples);
  r.read("test_samples", s.test_samples);
  r.read("vocab", s.vocab);
  r.finish();
}

void read_vit(FieldReader& r, VitConfig& v) {
  // The preset only fills in sizes: it is applied before the keys beside it
  // and not kept, so an export writes the sizes themselves.
  std::string preset;
  r.read("preset", preset);
  if (preset == "b16")
    v = {16, 768, 12, 12, 3072};
  else if (!preset.empty() && preset != "small")
    r.fail("preset", "unknown value " + detail::describe(json(preset)) + "; allowed: small, b16");
  r.read("patch", v.patch);
  r.read("dim", v.dim);
  r.read("depth", v.depth);
  r.read("heads", v.heads);
  r.read("mlp_dim", v.mlp_dim);
  r.finish();
}

void read_transformer(FieldReader& r, TransformerConfig& t) {
  r.read("vocab", t.vocab);
  r.read("hidden", t.hidden);
  r.read("layers", t.layers);
  r.read("heads", t.heads);
  r.read("ffn", t.ffn);
  r.read("max_positions", t.max_positions);
  r.finish();
}

void read_freeze(FieldReader& r, FreezeConfig& f) {
  r.read_enum("method", f.method);
  r.read("alpha", f.alpha);
  r.read("check_every", f.check_every);
  r.read("tolerance", f.tolerance);
  if (const json* list = r.array("schedule")) {
    for (size_t i = 0; i < list->size(); ++i) {
      const json& item = (*list)[i];
      std::string key = "schedule[" + std::to_string(i) + "]";
      if (!item.is_object()) {
        r.fail(key.c_str(),
               "expected a mapping with at_step and blocks, got " + detail::describe(item));
        continue;
      }
      FieldReader stage = r.nested(item, key);
      FreezeStage s;
      stage.read("at_step", s.at_step);
      stage.read("blocks", s.blocks);
      stage.finish();
      f.schedule.push_back(s);
    }
  }
  r.finish();
}

// Reads what it can into `c` and lists every problem, validation included
// once every key could be read.
ExperimentConfig read_config(const json& root, std::string_view source,
                             std::vector<std::string>& problems) {
  ExperimentConfig c;
  if (!root.is_object()) {
    problems.push_back(std::string(source) + ": expected a mapping of keys, got " +
                       detail::describe(root));
    return c;
  }
  FieldReader r(root, "", problems);
  r.read("name", c.name);
  r.read_enum("model", c.model);
  if (auto v = r.child("vit")) read_vit(*v, c.vit);
  if (auto t = r.child("transformer")) read_transformer(*t, c.transformer);
  r.read_enum("dataset", c.dataset);
  r.read("data_dir", c.data_dir);
  if (auto s = r.child("synthetic")) read_synthetic(*s, c.synthetic);
  r.read("augment", c.augment);
  r.read_enum("strategy", c.strategy);
  r.read_enum("schedule", c.schedule);
  r.read("ranks_per_node", c.ranks_per_node);
  r.read("devices", c.devices);
  r.read("nodes", c.nodes);
  r.read("replicas", c.replicas);
  r.read("batch_size", c.batch_size);
  r.read_enum("batch_scope", c.batch_scope);
  r.read("chunks", c.chunks);
  r.read("balance", c.balance);
  r.read("checkpoint", c.checkpoint);
  r.read("epochs", c.epochs);
  r.read("max_steps", c.max_steps);
  r.read("bucket_mb", c.bucket_mb);
  if (auto o = r.child("optimizer")) {
    o->read_enum("name", c.optimizer.name);
    o->read("lr", c.optimizer.lr);
    o->read("momentum", c.optimizer.momentum);
    o->read("weight_decay", c.optimizer.weight_decay);
    o->finish();
  }
  if (auto l = r.child("lr_schedule")) {
    l->read_enum("name", c.lr_schedule.name);
    l->read("warmup_steps", c.lr_schedule.warmup_steps);
    l->read("step_epochs", c.lr_schedule.step_epochs);
    l->read("gamma", c.lr_schedule.gamma);
    l->finish();
  }
  if (auto f = r.child("freeze")) read_freeze(*f, c.freeze);
  if (auto e = r.child("elastic")) {
    e->read("pipe", c.elastic.pipe);
    e->read("dp", c.elastic.dp);
    e->read("cache", c.elastic.cache);
    e->read("cache_mb", c.elastic.cache_mb);
    e->finish();
  }
  if (auto z = r.child("compression")) {
    z->read_enum("method", c.compression.method);
    z->read("bits", c.compression.bits);
    z->read("split_bits", c.compression.split_bits);
    z->finish();
  }
  r.read_enum("device", c.device);
  r.read_enum("precision", c.precision);
  r.read("channels_last", c.channels_last);
  r.read("seed", c.seed);
  r.read("threads", c.threads);
  r.read("dropout", c.dropout);
  if (auto l = r.child("limits")) {
    l->read("memory_mb", c.limits.memory_mb);
    l->finish();
  }
  if (auto v = r.child("save")) {
    v->read("every_steps", c.save.every_steps);
    v->read("every_minutes", c.save.every_minutes);
    v->read("keep", c.save.keep);
    v->read("dir", c.save.dir);
    v->finish();
  }
  if (auto s = r.child("slurm")) {
    s->read("nodes", c.slurm.nodes);
    s->read("gpus_per_node", c.slurm.gpus_per_node);
    s->read("time", c.slurm.time);
    s->read("partition", c.slurm.partition);
    s->read("account", c.slurm.account);
    s->read("extra", c.slurm.extra);
    s->finish();
  }
  r.read("stall_timeout_s", c.stall_timeout_s);
  r.finish();
  if (problems.empty()) problems = validate(c);
  return c;
}

ExperimentConfig from_json(const json& root, std::string_view source) {
  std::vector<std::string> problems;
  ExperimentConfig c = read_config(root, source, problems);
  if (!problems.empty()) throw ConfigError(std::move(problems));
  return c;
}

}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : std::runtime_error(join_lines(problems)), problems_(std::move(problems)) {}

ExperimentConfig parse_experiment(std::string_view text, std::string_view source) {
  json root;
  try {
    root = detail::parse_yaml_or_json(text, source);
  } catch (const std::runtime_error& e) {
    throw ConfigError({e.what()});
  }
  return from_json(root, source);
}

ExperimentConfig read_experiment(std::string_view text, std::string_view source,
                                 std::vector<std::string>& problems) {
  json root;
  try {
    root = detail::parse_yaml_or_json(text, source);
  } catch (const std::runtime_error& e) {
    problems.push_back(e.what());
    return {};
  }
  return read_config(root, source, problems);
}

ExperimentConfig load_experiment(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError({file.string() + ": cannot read the file"});
  std::stringstream text;
  text << in.rdbuf();
  return parse_experiment(text.str(), file.string());
}

static json to_json_value(const ExperimentConfig& c) {
  json freeze_schedule = json::array();
  for (const auto& s : c.freeze.schedule)
    freeze_schedule.push_back({{"at_step", s.at_step}, {"blocks", s.blocks}});
  return json{
      {"name", c.name},
      {"model", name_of(c.model)},
      {"vit",
       {{"patch", c.vit.patch},
        {"dim", c.vit.dim},
        {"depth", c.vit.depth},
        {"heads", c.vit.heads},
        {"mlp_dim", c.vit.mlp_dim}}},
      {"transformer",
       {{"vocab", c.transformer.vocab},
        {"hidden", c.transformer.hidden},
        {"layers", c.transformer.layers},
        {"heads", c.transformer.heads},
        {"ffn", c.transformer.ffn},
        {"max_positions", c.transformer.max_positions}}},
      {"dataset", name_of(c.dataset)},
      {"data_dir", c.data_dir},
      {"synthetic",
       {{"shape", c.synthetic.shape},
        {"classes", c.synthetic.classes},
        {"train_samples", c.synthetic.train_samples},
        {"test_samples", c.synthetic.test_samples},
        {"vocab", c.synthetic.vocab}}},
      {"augment", c.augment},
      {"strategy", name_of(c.strategy)},
      {"schedule", name_of(c.schedule)},
      {"ranks_per_node", c.ranks_per_node},
      {"devices", c.devices},
      {"nodes", c.nodes},
      {"replicas", c.replicas},
      {"batch_size", c.batch_size},
      {"batch_scope", name_of(c.batch_scope)},
      {"chunks", c.chunks},
      {"balance", c.balance},
      {"checkpoint", c.checkpoint},
      {"epochs", c.epochs},
      {"max_steps", c.max_steps},
      {"bucket_mb", c.bucket_mb},
      {"optimizer",
       {{"name", name_of(c.optimizer.name)},
        {"lr", c.optimizer.lr},
        {"momentum", c.optimizer.momentum},
        {"weight_decay", c.optimizer.weight_decay}}},
      {"lr_schedule",
       {{"name", name_of(c.lr_schedule.name)},
        {"warmup_steps", c.lr_schedule.warmup_steps},
        {"step_epochs", c.lr_schedule.step_epochs},
        {"gamma", c.lr_schedule.gamma}}},
      {"freeze",
       {{"method", name_of(c.freeze.method)},
        {"alpha", c.freeze.alpha},
        {"check_every", c.freeze.check_every},
        {"tolerance", c.freeze.tolerance},
        {"schedule", freeze_schedule}}},
      {"elastic",
       {{"pipe", c.elastic.pipe},
        {"dp", c.elastic.dp},
        {"cache", c.elastic.cache},
        {"cache_mb", c.elastic.cache_mb}}},
      {"compression",
       {{"method", name_of(c.compression.method)},
        {"bits", c.compression.bits},
        {"split_bits", c.compression.split_bits}}},
      {"device", name_of(c.device)},
      {"precision", name_of(c.precision)},
      {"channels_last", c.channels_last},
      {"seed", c.seed},
      {"threads", c.threads},
      {"dropout", c.dropout},
      {"limits", {{"memory_mb", c.limits.memory_mb}}},
      {"save",
       {{"every_steps", c.save.every_steps},
        {"every_minutes", c.save.every_minutes},
        {"keep", c.save.keep},
        {"dir", c.save.dir}}},
      {"slurm",
       {{"nodes", c.slurm.nodes},
        {"gpus_per_node", c.slurm.gpus_per_node},
        {"time", c.slurm.time},
        {"partition", c.slurm.partition},
        {"account", c.slurm.account},
        {"extra", c.slurm.extra}}},
      {"stall_timeout_s", c.stall_timeout_s},
  };
}

std::string to_json(const ExperimentConfig& config, int indent) {
  return to_json_value(config).dump(indent);
}

std::string to_yaml(const ExperimentConfig& config) {
  return detail::json_to_yaml(to_json_value(config));
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> entries;
  constexpr std::string_view kSpace = " \t\r\n";
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t first = entry.find_first_not_of(kSpace);
    if (first == std::string_view::npos) continue;
    entry = entry.substr(first, entry.find_last_not_of(kSpace) - first + 1);
    entries.emplace_back(entry);
  }
  return entries;
}

std::string join_list(const std::vector<std::string>& entries) {
  std::string text;
  for (const auto& e : entries) text += (text.empty() ? "" : ",") + e;
  return text;
}

bool is_cnn(ModelKind model) {
  return model == ModelKind::small_cnn || model == ModelKind::resnet18 ||
         model == ModelKind::mobilenet_v2 || model == ModelKind::vgg13;
}

std::string_view name_of(ModelKind v) {
  return detail::enum_name(v);
}
std::string_view name_of(DatasetKind v) {
  return detail::enum_name(v);
}
std::string_view name_of(Strategy v) {
  return detail::enum_name(v);
}
std::string_view name_of(Schedule v) {
  return detail::enum_name(v);
}
std::string_view name_of(BatchScope v) {
  return detail::enum_name(v);
}
std::string_view name_of(OptimizerKind v) {
  return detail::enum_name(v);
}
std::string_view name_of(LrScheduleKind v) {
  return detail::enum_name(v);
}
std::string_view name_of(FreezeMethod v) {
  return detail::enum_name(v);
}
std::string_view name_of(CompressionMethod v) {
  return detail::enum_name(v);
}
std::string_view name_of(DeviceKind v) {
  return detail::enum_name(v);
}
std::string_view name_of(Precision v) {
  return detail::enum_name(v);
}

}  // namespace flotilla
