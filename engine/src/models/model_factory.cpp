#include "model_factory.h"

#include "mobilenet_v2.h"
#include "resnet.h"
#include "small_cnn.h"

namespace flotilla {

torch::nn::Sequential build_model(const ExperimentConfig& c, const DataShape& shape) {
  if (shape.sample.size() != 3)
    throw ConfigError({"model: \"" + std::string(name_of(c.model)) +
                       "\" takes images [channels, height, width], but the data set gives " +
                       std::to_string(shape.sample.size()) + "-d samples"});
  const int64_t channels = shape.sample[0];
  switch (c.model) {
    case ModelKind::small_cnn:
      return models::small_cnn(
          {channels, shape.sample[1], shape.sample[2], shape.classes, c.dropout});
    case ModelKind::resnet18:
      return models::resnet18({channels, shape.classes, c.dropout});
    case ModelKind::mobilenet_v2:
      return models::mobilenet_v2({channels, shape.classes, c.dropout});
    default:
      break;
  }
  throw ConfigError({"model: \"" + std::string(name_of(c.model)) + "\" is not implemented yet"});
}

int64_t parameter_count(const torch::nn::Module& model, bool trainable_only) {
  int64_t total = 0;
  for (const auto& p : model.parameters())
    if (!trainable_only || p.requires_grad()) total += p.numel();
  return total;
}

}  // namespace flotilla
