#include <gtest/gtest.h>

#include "models/model_factory.h"

namespace flotilla {
namespace {

ExperimentConfig config_for(ModelKind model) {
  ExperimentConfig c;
  c.model = model;
  c.dataset = DatasetKind::synthetic;
  return c;
}

TEST(Models, ResNet18HasTheSeedsParameterCount) {
  auto model = build_model(config_for(ModelKind::resnet18), {{3, 32, 32}, 10});
  // The seed study prints 11173962 for kuangliu's ResNet18 (trainable parameters).
  EXPECT_EQ(parameter_count(*model, true), 11173962);
}

TEST(Models, MobileNetV2MatchesThePyTorchCifarModel) {
  auto model = build_model(config_for(ModelKind::mobilenet_v2), {{3, 32, 32}, 10});
  // kuangliu/pytorch-cifar MobileNetV2(num_classes=10), counted with python3-torch.
  EXPECT_EQ(parameter_count(*model), 2296922);
}

TEST(Models, BlockCountsMatchTheCatalogue) {
  for (auto kind : {ModelKind::small_cnn, ModelKind::resnet18, ModelKind::mobilenet_v2}) {
    auto config = config_for(kind);
    auto model = build_model(config, {{3, 32, 32}, 10});
    EXPECT_EQ(static_cast<int64_t>(model->size()), model_block_count(config)) << name_of(kind);
  }
}

struct ShapeCase {
  ModelKind model;
  std::vector<int64_t> sample;
  int64_t classes;
};

class ModelShapes : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(ModelShapes, MapBatchesToLogitsThroughEveryBlock) {
  const auto& p = GetParam();
  torch::manual_seed(0);
  auto model = build_model(config_for(p.model), {p.sample, p.classes});
  std::vector<int64_t> shape{4};
  shape.insert(shape.end(), p.sample.begin(), p.sample.end());
  auto x = torch::randn(shape);
  // Run block by block, as a pipeline would cut it.
  for (auto& block : *model) x = block.forward(x);
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{4, p.classes}));
  EXPECT_TRUE(torch::isfinite(x).all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(All, ModelShapes,
                         ::testing::Values(ShapeCase{ModelKind::small_cnn, {1, 28, 28}, 10},
                                           ShapeCase{ModelKind::small_cnn, {3, 32, 32}, 100},
                                           ShapeCase{ModelKind::resnet18, {1, 28, 28}, 10},
                                           ShapeCase{ModelKind::resnet18, {3, 32, 32}, 100},
                                           ShapeCase{ModelKind::mobilenet_v2, {1, 28, 28}, 10},
                                           ShapeCase{ModelKind::mobilenet_v2, {3, 32, 32}, 10}));

TEST(Models, UnbuiltModelsAreRefusedByName) {
  try {
    build_model(config_for(ModelKind::vit), {{3, 32, 32}, 10});
    FAIL() << "vit built";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "model: \"vit\" is not implemented yet");
  }
}

TEST(Models, ImageModelsRefuseSequences) {
  EXPECT_THROW(build_model(config_for(ModelKind::resnet18), {{128}, 2}), ConfigError);
}

}  // namespace
}  // namespace flotilla
