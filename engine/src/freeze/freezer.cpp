#include "freeze/freezer.h"

#include <algorithm>
#include <cmath>

namespace flotilla {

Freezer::Freezer(FreezeConfig config, int64_t blocks)
    : config_(std::move(config)),
      blocks_(blocks),
      // The last block (the head) always trains; alpha bounds the rest.
      limit_(std::min<int64_t>(blocks - 1, static_cast<int64_t>(std::floor(
                                               config_.alpha * static_cast<double>(blocks))))) {
  if (config_.method == FreezeMethod::fixed) limit_ = blocks - 1;
}

int64_t Freezer::frozen_at(int64_t step) {
  if (config_.method != FreezeMethod::fixed) return frozen_;
  for (const auto& stage : config_.schedule)
    if (step >= stage.at_step) frozen_ = std::max(frozen_, std::min(stage.blocks, limit_));
  return frozen_;
}

bool Freezer::checks_after(int64_t step) const {
  return config_.method == FreezeMethod::autofreeze && step > 0 &&
         step % config_.check_every == 0 && frozen_ < limit_;
}

int64_t Freezer::observe(const std::vector<double>& norms) {
  if (!previous_.empty()) {
    int64_t prefix = frozen_;
    while (prefix < limit_) {
      const double now = norms[prefix], before = previous_[prefix];
      const bool no_parameters = now < 0 || before < 0;
      const bool settled =
          no_parameters || std::abs(now - before) <= config_.tolerance * std::max(before, 1e-12);
      if (!settled) break;
      ++prefix;
    }
    // Blocks without parameters are not worth freezing on their own: the prefix
    // ends at the last settled block that has some.
    while (prefix > frozen_ && (norms[prefix - 1] < 0 || previous_[prefix - 1] < 0)) --prefix;
    frozen_ = prefix;
  }
  previous_ = norms;
  return frozen_;
}

void freeze_leading_blocks(torch::nn::Sequential& blocks, int64_t first_block, int64_t frozen) {
  for (int64_t b = 0; b < static_cast<int64_t>(blocks->size()) && first_block + b < frozen; ++b)
    for (auto& p : (blocks->begin() + b)->ptr()->parameters()) {
      p.requires_grad_(false);
      p.mutable_grad().reset();
    }
}

}  // namespace flotilla
