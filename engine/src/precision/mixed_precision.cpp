#include "precision/mixed_precision.h"

#include "torch_adapter.h"

namespace flotilla {

torch::ScalarType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return torch::kFloat32;
    case Precision::bf16:
      return torch::kBFloat16;
    case Precision::fp16:
      return torch::kFloat16;
  }
  return torch::kFloat32;
}

torch::ScalarType gradient_wire_dtype(Precision precision, bool cuda) {
  const auto dtype = compute_dtype(precision);
  if (allreduces(cuda, dtype)) return dtype;
  if (dtype == torch::kBFloat16 && allreduces(cuda, torch::kFloat16)) return torch::kFloat16;
  return torch::kFloat32;
}

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32:
      return "float32";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kFloat16:
      return "float16";
    default:
      return c10::toString(dtype);
  }
}

void to_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& parameter : model.parameters())
    if (parameter.dim() == 4)
      parameter.set_data(parameter.data().contiguous(torch::MemoryFormat::ChannelsLast));
}

torch::Tensor to_channels_last(const torch::Tensor& images) {
  return images.dim() == 4 ? images.contiguous(torch::MemoryFormat::ChannelsLast) : images;
}

LossScaler::LossScaler(bool enabled, double initial_scale, int64_t growth_interval)
    : enabled_(enabled), scale_(initial_scale), growth_interval_(growth_interval) {}

bool LossScaler::unscale(const std::vector<torch::Tensor>& parameters,
                         const std::function<bool(bool)>& agree) {
  if (!enabled_) return true;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> finite;
  for (const auto& p : parameters) {
    const auto& grad = p.grad();
    if (!grad.defined()) continue;
    grad.mul_(1.0 / scale_);
    finite.push_back(torch::isfinite(grad).all());
  }
  bool all_finite = finite.empty() || torch::stack(finite).all().item<bool>();
  if (agree) all_finite = agree(all_finite);
  return all_finite;
}

void LossScaler::update(bool finite) {
  if (!enabled_) return;
  if (!finite) {
    scale_ /= 2;
    good_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++good_steps_ >= growth_interval_) {
    scale_ *= 2;
    good_steps_ = 0;
  }
}

}  // namespace flotilla
