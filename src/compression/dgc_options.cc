#include "compression/dgc_options.h"

#include <algorithm>
#include <cmath>

#include "ringd/error.h"

namespace ringd {

std::vector<double> dgc_warmup_schedule(int epochs, double sparsity) {
  std::vector<double> schedule;
  double density = 1.0;
  for (int e = 0; e < epochs; ++e) {
    density /= 4;
    schedule.push_back(std::min(1.0 - density, sparsity));
  }
  return schedule;
}

}  // namespace ringd

namespace ringd::compression {

double sparsity_at(const DgcOptions& options, int epoch) {
  if (epoch >= 0 && static_cast<size_t>(epoch) < options.warmup.size()) {
    return options.warmup[static_cast<size_t>(epoch)];
  }
  return options.sparsity;
}

size_t kept_entries(size_t count, double sparsity) {
  if (count == 0) return 0;
  // The small epsilon keeps 1000 x (1 - 0.999) = 1.0000000000000009 at 1, not 2.
  const double kept = std::ceil(static_cast<double>(count) * (1.0 - sparsity) - 1e-6);
  if (kept < 1.0) return 1;
  if (kept >= static_cast<double>(count)) return count;
  return static_cast<size_t>(kept);
}

bool sends_sparse(const DgcOptions& options, size_t count, int ranks, double sparsity) {
  if (count < options.min_sparse_elements || ranks < 1) return false;
  return kept_entries(count, sparsity) * static_cast<size_t>(ranks) < count;
}

void check_dgc_options(const DgcOptions& options) {
  const auto check_sparsity = [](double sparsity, const char* what) {
    RINGD_CHECK_ARG(sparsity >= 0.0 && sparsity < 1.0,
                    "dgc: " << what << " " << sparsity << " is outside [0, 1) (0.999 sends 0.1%)");
  };
  check_sparsity(options.sparsity, "sparsity");
  for (double sparsity : options.warmup) check_sparsity(sparsity, "warm-up sparsity");
  RINGD_CHECK_ARG(options.momentum >= 0.0f && options.momentum < 1.0f,
                  "dgc: momentum " << options.momentum << " is outside [0, 1)");
  RINGD_CHECK_ARG(options.clip_norm >= 0.0f && std::isfinite(options.clip_norm),
                  "dgc: clip norm " << options.clip_norm << " must be a finite number >= 0");
  RINGD_CHECK_ARG(options.sample_fraction > 0.0 && options.sample_fraction <= 1.0,
                  "dgc: sample fraction " << options.sample_fraction << " is outside (0, 1]");
}

}  // namespace ringd::compression
