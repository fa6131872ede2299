#pragma once
// One table per enum maps values to their config spelling, so that parsing,
// printing and "allowed: ..." messages cannot drift apart.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "flotilla/protocol/experiment_config.h"

namespace flotilla::detail {

template <typename E>
struct EnumNames;

#define FLOTILLA_ENUM_NAMES(E, ...)                                          \
  template <>                                                                \
  struct EnumNames<E> {                                                      \
    static constexpr std::pair<E, std::string_view> table[] = {__VA_ARGS__}; \
  };

FLOTILLA_ENUM_NAMES(ModelKind, {ModelKind::small_cnn, "small_cnn"},
                    {ModelKind::resnet18, "resnet18"}, {ModelKind::mobilenet_v2, "mobilenet_v2"},
                    {ModelKind::vgg13, "vgg13"}, {ModelKind::vit, "vit"},
                    {ModelKind::transformer_encoder, "transformer_encoder"})
FLOTILLA_ENUM_NAMES(DatasetKind, {DatasetKind::fashion_mnist, "fashion_mnist"},
                    {DatasetKind::mnist, "mnist"}, {DatasetKind::cifar10, "cifar10"},
                    {DatasetKind::cifar100, "cifar100"}, {DatasetKind::synthetic, "synthetic"})
FLOTILLA_ENUM_NAMES(Strategy, {Strategy::single, "single"}, {Strategy::dp, "dp"},
                    {Strategy::ddp, "ddp"}, {Strategy::pipeline, "pipeline"},
                    {Strategy::pipeline_ddp, "pipeline_ddp"})
FLOTILLA_ENUM_NAMES(Schedule, {Schedule::gpipe, "gpipe"}, {Schedule::one_f_one_b, "1f1b"})
FLOTILLA_ENUM_NAMES(BatchScope, {BatchScope::per_replica, "per_replica"},
                    {BatchScope::global, "global"})
FLOTILLA_ENUM_NAMES(OptimizerKind, {OptimizerKind::sgd, "sgd"}, {OptimizerKind::adamw, "adamw"})
FLOTILLA_ENUM_NAMES(LrScheduleKind, {LrScheduleKind::constant, "constant"},
                    {LrScheduleKind::step, "step"}, {LrScheduleKind::cosine, "cosine"})
FLOTILLA_ENUM_NAMES(FreezeMethod, {FreezeMethod::none, "none"}, {FreezeMethod::fixed, "fixed"},
                    {FreezeMethod::autofreeze, "auto"})
FLOTILLA_ENUM_NAMES(CompressionMethod, {CompressionMethod::none, "none"},
                    {CompressionMethod::uniform, "uniform"},
                    {CompressionMethod::sort_quant, "sort_quant"})
FLOTILLA_ENUM_NAMES(DeviceKind, {DeviceKind::cpu, "cpu"}, {DeviceKind::cuda, "cuda"})
FLOTILLA_ENUM_NAMES(Precision, {Precision::fp32, "fp32"}, {Precision::bf16, "bf16"},
                    {Precision::fp16, "fp16"})

#undef FLOTILLA_ENUM_NAMES

template <typename E>
std::string_view enum_name(E value) {
  for (const auto& [v, name] : EnumNames<E>::table)
    if (v == value) return name;
  return "?";
}

template <typename E>
std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& [v, n] : EnumNames<E>::table)
    if (n == name) return v;
  return std::nullopt;
}

template <typename E>
std::string enum_allowed() {
  std::string out;
  for (const auto& [v, name] : EnumNames<E>::table) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace flotilla::detail
