#include <gtest/gtest.h>

#include "data/dataset.h"
#include "models/model_factory.h"

namespace flotilla {
namespace {

ExperimentConfig config_for(ModelKind model) {
  ExperimentConfig c;
  c.model = model;
  c.dataset = DatasetKind::synthetic;
  return c;
}

// Small sizes that keep the attention models' tests fast.
ExperimentConfig tiny_config(ModelKind model) {
  auto c = config_for(model);
  c.vit = {4, 32, 2, 4, 64};
  c.transformer = {64, 32, 2, 4, 64, 34};
  return c;
}

// The data each model takes in these tests: images, or 16 token ids below 64.
DataShape tiny_shape(ModelKind model) {
  if (model == ModelKind::transformer_encoder) return {{16}, 2, 64};
  return {{3, 32, 32}, 10};
}

torch::Tensor sample_batch(const DataShape& shape, int64_t batch) {
  std::vector<int64_t> sizes{batch};
  sizes.insert(sizes.end(), shape.sample.begin(), shape.sample.end());
  if (shape.vocab > 0) return torch::randint(shape.vocab, sizes, torch::kInt64);
  return torch::randn(sizes);
}

torch::nn::AnyModule& block(torch::nn::Sequential& model, size_t index) {
  return *(model->begin() + static_cast<std::ptrdiff_t>(index));
}

const ModelKind kAllModels[] = {ModelKind::small_cnn,    ModelKind::resnet18,
                                ModelKind::mobilenet_v2, ModelKind::vgg13,
                                ModelKind::vit,          ModelKind::transformer_encoder};

// One transformer layer or ViT block: attention (4 d^2 + 4 d: in-projection
// and output projection with biases), the feed-forward pair (2 d f + f + d)
// and two LayerNorms (4 d).
int64_t encoder_layer_parameters(int64_t d, int64_t f) {
  return 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d;
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

TEST(Models, Vgg13MatchesThePyTorchCifarModel) {
  // kuangliu/pytorch-cifar VGG('VGG13') counted with python3-torch: 9416010 for
  // 3 channels and 10 classes, 9414858 with a 1-channel first conv.
  EXPECT_EQ(parameter_count(*build_model(config_for(ModelKind::vgg13), {{3, 32, 32}, 10})),
            9416010);
  EXPECT_EQ(parameter_count(*build_model(config_for(ModelKind::vgg13), {{1, 28, 28}, 10})),
            9414858);
}

TEST(Models, VitB16HasTorchvisionsParameterCount) {
  auto config = config_for(ModelKind::vit);
  config.vit = {16, 768, 12, 12, 3072};
  auto model = build_model(config, {{3, 224, 224}, 1000});
  ASSERT_EQ(static_cast<int64_t>(model->size()), 14);
  // Every encoder block by the formula: 7,087,872 for d 768 and MLP 3072.
  for (size_t i = 1; i <= 12; ++i)
    EXPECT_EQ(parameter_count(*model->ptr(i)), encoder_layer_parameters(768, 3072)) << i;
  // Patch conv, class token and 197 positions; final LayerNorm and head.
  EXPECT_EQ(parameter_count(*model->ptr(0)), 3 * 768 * 16 * 16 + 768 + 768 + 197 * 768);
  EXPECT_EQ(parameter_count(*model->ptr(13)), 2 * 768 + 768 * 1000 + 1000);
  // torchvision.models.vit_b_16(): 86,567,656 parameters.
  EXPECT_EQ(parameter_count(*model), 86567656);
}

TEST(Models, TransformerDefaultsToRobertaBase) {
  const auto config = config_for(ModelKind::transformer_encoder);
  auto model = build_model(config, {{128}, 2, 50265});
  ASSERT_EQ(static_cast<int64_t>(model->size()), 14);
  EXPECT_EQ(model_block_count(config), 14);
  EXPECT_EQ(encoder_layer_parameters(768, 3072), 7087872);
  for (size_t i = 1; i <= 12; ++i)
    EXPECT_EQ(parameter_count(*model->ptr(i)), encoder_layer_parameters(768, 3072)) << i;
  // Token, 514 position and 1 type embedding rows, and a LayerNorm.
  EXPECT_EQ(parameter_count(*model->ptr(0)), (50265 + 514 + 1) * 768 + 2 * 768);
  // RobertaClassificationHead: dense 768x768 and out_proj 768x2, with biases.
  EXPECT_EQ(parameter_count(*model->ptr(13)), 768 * 768 + 768 + 768 * 2 + 2);
  // Hugging Face RobertaForSequenceClassification (roberta-base, 2 labels):
  // 124,647,170 parameters; RobertaModel with its pooler has 124,645,632.
  EXPECT_EQ(parameter_count(*model), 124647170);
}

TEST(Models, BlockCountsMatchTheCatalogue) {
  for (auto kind : kAllModels) {
    // Default sizes; RoBERTa-base's 14 blocks are counted in its own test.
    auto config = kind == ModelKind::transformer_encoder ? tiny_config(kind) : config_for(kind);
    auto model = build_model(config, tiny_shape(kind));
    EXPECT_EQ(static_cast<int64_t>(model->size()), model_block_count(config)) << name_of(kind);
  }
  // The attention models have one block per layer besides embedding and head.
  for (auto kind : {ModelKind::vit, ModelKind::transformer_encoder}) {
    auto config = tiny_config(kind);
    config.vit.depth = 3;
    config.transformer.layers = 5;
    auto model = build_model(config, tiny_shape(kind));
    EXPECT_EQ(static_cast<int64_t>(model->size()), model_block_count(config)) << name_of(kind);
    EXPECT_EQ(model_block_count(config), kind == ModelKind::vit ? 5 : 7);
  }
}

TEST(Models, EveryBlockMapsOneTensorToOneAndTheChainIsTheModel) {
  for (auto kind : kAllModels) {
    SCOPED_TRACE(name_of(kind));
    torch::manual_seed(0);
    const auto shape = tiny_shape(kind);
    auto model = build_model(tiny_config(kind), shape);
    model->eval();  // batch norm from running statistics: both passes see the same function
    torch::NoGradGuard no_grad;
    const auto input = sample_batch(shape, 2);
    const auto whole = model->forward(input);
    auto x = input;
    for (auto& block : *model) {
      x = block.forward(x);
      ASSERT_TRUE(x.defined());
    }
    EXPECT_TRUE(torch::equal(x, whole));
  }
}

struct ShapeCase {
  ModelKind model;
  std::vector<int64_t> sample;
  int64_t classes;
  int64_t vocab = 0;
};

// e.g. resnet18_3x32x32_100classes, transformer_encoder_16_2classes_vocab64:
// the test's name, and what ctest shows as its parameter.
std::string describe(const ShapeCase& p) {
  std::string name(name_of(p.model));
  for (size_t i = 0; i < p.sample.size(); ++i)
    name += (i == 0 ? "_" : "x") + std::to_string(p.sample[i]);
  name += "_" + std::to_string(p.classes) + "classes";
  if (p.vocab > 0) name += "_vocab" + std::to_string(p.vocab);
  return name;
}
void PrintTo(const ShapeCase& p, std::ostream* os) {
  *os << describe(p);
}

class ModelShapes : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(ModelShapes, MapBatchesToLogitsThroughEveryBlock) {
  const auto& p = GetParam();
  torch::manual_seed(0);
  const DataShape shape{p.sample, p.classes, p.vocab};
  auto model = build_model(tiny_config(p.model), shape);
  auto x = sample_batch(shape, 4);
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
                                           ShapeCase{ModelKind::mobilenet_v2, {3, 32, 32}, 10},
                                           ShapeCase{ModelKind::vgg13, {1, 28, 28}, 10},
                                           ShapeCase{ModelKind::vgg13, {3, 32, 32}, 100},
                                           ShapeCase{ModelKind::vgg13, {3, 64, 48}, 10},
                                           ShapeCase{ModelKind::vit, {1, 28, 28}, 10},
                                           ShapeCase{ModelKind::vit, {3, 32, 32}, 100},
                                           ShapeCase{ModelKind::vit, {3, 16, 8}, 5},
                                           ShapeCase{ModelKind::transformer_encoder, {16}, 2, 64},
                                           ShapeCase{ModelKind::transformer_encoder, {5}, 7, 10}),
                         [](const ::testing::TestParamInfo<ShapeCase>& info) {
                           return describe(info.param);
                         });

TEST(Models, VitTokensAreTheClassTokenAndOnePerPatch) {
  auto config = tiny_config(ModelKind::vit);
  auto model = build_model(config, {{1, 28, 28}, 10});
  auto out = block(model, 0).forward(torch::randn({2, 1, 28, 28}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 1 + 7 * 7, 32}));
  EXPECT_EQ(block(model, 1).forward(out).sizes(), out.sizes());
}

TEST(Models, TransformerBlocksPassHiddenStatesOfTheSequence) {
  auto model = build_model(tiny_config(ModelKind::transformer_encoder), {{16}, 2, 64});
  auto x = block(model, 0).forward(torch::randint(64, {3, 16}, torch::kInt64));
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{3, 16, 32}));
  EXPECT_EQ(x.scalar_type(), torch::kFloat32);
  EXPECT_EQ(block(model, 1).forward(x).sizes(), x.sizes());
}

// A short training run of a tiny transformer on the synthetic token data.
TEST(Models, SgdStepsReduceTheLossOnSyntheticTokens) {
  auto config = tiny_config(ModelKind::transformer_encoder);
  config.synthetic = {{16}, 2, 256, 64, 64};
  config.seed = 3;
  const auto data = data::load_dataset(config);
  torch::manual_seed(config.seed);
  auto model = build_model(config, data.shape);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.03).momentum(0.9));
  const auto& inputs = data.train.images;  // the 256 distinct sequences
  const auto labels = data.train.labels.narrow(0, 0, inputs.size(0));
  auto loss_of = [&](const torch::Tensor& x, const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(model->forward(x), y);
  };
  double before = 0;
  {
    torch::NoGradGuard no_grad;
    before = loss_of(inputs, labels).item<double>();
  }
  for (int step = 0; step < 30; ++step) {
    const auto batch = torch::arange((step * 32) % 256, (step * 32) % 256 + 32);
    auto loss = loss_of(inputs.index({batch}), labels.index({batch}));
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }
  torch::NoGradGuard no_grad;
  const double after = loss_of(inputs, labels).item<double>();
  EXPECT_LT(after, 0.75 * before) << "before " << before << ", after " << after;
}

TEST(Models, ModelsRefuseDataTheyCannotTake) {
  auto message = [](const ExperimentConfig& c, const DataShape& shape) -> std::string {
    try {
      build_model(c, shape);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "built";
  };
  EXPECT_EQ(message(config_for(ModelKind::resnet18), {{128}, 2}),
            "model: \"resnet18\" takes images [channels, height, width], but the data set gives "
            "float samples [128]");
  EXPECT_EQ(message(config_for(ModelKind::vgg13), {{128}, 2, 1000}),
            "model: \"vgg13\" takes images [channels, height, width], but the data set gives "
            "token ids [128]");
  EXPECT_EQ(message(tiny_config(ModelKind::transformer_encoder), {{3, 32, 32}, 10}),
            "model: \"transformer_encoder\" takes token ids [length], but the data set gives "
            "float samples [3, 32, 32]");
  EXPECT_EQ(message(tiny_config(ModelKind::transformer_encoder), {{16}, 2, 100}),
            "transformer.vocab: must cover the data set's 100 token ids, got 64");
  EXPECT_EQ(message(tiny_config(ModelKind::transformer_encoder), {{33}, 2, 64}),
            "transformer.max_positions: must be at least the sequence length + 2 (35), got 34");
  EXPECT_EQ(message(tiny_config(ModelKind::vit), {{3, 30, 30}, 10}),
            "vit.patch: must divide the 30x30 images, got 4");
  EXPECT_EQ(message(tiny_config(ModelKind::vit), {{16}, 2, 64}),
            "model: \"vit\" takes images [channels, height, width], but the data set gives "
            "token ids [16]");
}

}  // namespace
}  // namespace flotilla
