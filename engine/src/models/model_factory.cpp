#include "model_factory.h"

#include "mobilenet_v2.h"
#include "resnet.h"
#include "small_cnn.h"
#include "transformer_encoder.h"
#include "vgg.h"
#include "vit.h"

namespace flotilla {
namespace {

std::string model_key(const ExperimentConfig& c) {
  return "model: \"" + std::string(name_of(c.model)) + "\"";
}

std::string describe(const DataShape& shape) {
  std::string dims;
  for (auto d : shape.sample) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return (shape.vocab > 0 ? "token ids [" : "float samples [") + dims + "]";
}

// validate() refuses these combinations already when it knows the data set's
// shape; these checks hold for shapes only known once the data is loaded.
void require_images(const ExperimentConfig& c, const DataShape& shape) {
  if (shape.sample.size() != 3 || shape.vocab > 0)
    throw ConfigError({model_key(c) +
                       " takes images [channels, height, width], but the data set gives " +
                       describe(shape)});
}

torch::nn::Sequential build_vit(const ExperimentConfig& c, const DataShape& shape) {
  require_images(c, shape);
  const auto& v = c.vit;
  const int64_t height = shape.sample[1], width = shape.sample[2];
  if (height % v.patch != 0 || width % v.patch != 0)
    throw ConfigError({"vit.patch: must divide the " + std::to_string(height) + "x" +
                       std::to_string(width) + " images, got " + std::to_string(v.patch)});
  return models::vit({shape.sample[0], height, width, shape.classes, v.patch, v.dim, v.depth,
                      v.heads, v.mlp_dim, c.dropout});
}

torch::nn::Sequential build_transformer(const ExperimentConfig& c, const DataShape& shape) {
  const auto& t = c.transformer;
  if (shape.sample.size() != 1 || shape.vocab == 0)
    throw ConfigError(
        {model_key(c) + " takes token ids [length], but the data set gives " + describe(shape)});
  if (shape.vocab > t.vocab)
    throw ConfigError({"transformer.vocab: must cover the data set's " +
                       std::to_string(shape.vocab) + " token ids, got " + std::to_string(t.vocab)});
  if (shape.sample[0] + 2 > t.max_positions)
    throw ConfigError({"transformer.max_positions: must be at least the sequence length + 2 (" +
                       std::to_string(shape.sample[0] + 2) + "), got " +
                       std::to_string(t.max_positions)});
  return models::transformer_encoder(
      {t.vocab, t.hidden, t.layers, t.heads, t.ffn, t.max_positions, shape.classes, c.dropout});
}

}  // namespace

torch::nn::Sequential build_model(const ExperimentConfig& c, const DataShape& shape) {
  switch (c.model) {
    case ModelKind::transformer_encoder:
      return build_transformer(c, shape);
    case ModelKind::vit:
      return build_vit(c, shape);
    default:
      break;
  }
  require_images(c, shape);
  const int64_t channels = shape.sample[0];
  switch (c.model) {
    case ModelKind::small_cnn:
      return models::small_cnn(
          {channels, shape.sample[1], shape.sample[2], shape.classes, c.dropout});
    case ModelKind::resnet18:
      return models::resnet18({channels, shape.classes, c.dropout});
    case ModelKind::mobilenet_v2:
      return models::mobilenet_v2({channels, shape.classes, c.dropout});
    case ModelKind::vgg13:
      return models::vgg13({channels, shape.classes, c.dropout});
    default:
      break;
  }
  throw ConfigError({model_key(c) + " is not implemented yet"});
}

int64_t parameter_count(const torch::nn::Module& model, bool trainable_only) {
  int64_t total = 0;
  for (const auto& p : model.parameters())
    if (!trainable_only || p.requires_grad()) total += p.numel();
  return total;
}

}  // namespace flotilla
