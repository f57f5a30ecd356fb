#include "model/replay_schedule.h"

#include <cmath>

#include "ringd/error.h"

namespace ringd::model {

const char* compute_spread_name(ComputeSpread spread) {
  return spread == ComputeSpread::kUniform ? "uniform" : "size";
}

ComputeSpread parse_compute_spread(const std::string& text) {
  if (text == "uniform") return ComputeSpread::kUniform;
  if (text == "size") return ComputeSpread::kBySize;
  RINGD_THROW(kInvalidArgument, "unknown compute spread '" << text << "'; valid: uniform size");
}

std::vector<Emission> backward_schedule(const GradientProfile& profile,
                                        std::chrono::microseconds compute, ComputeSpread spread) {
  const size_t n = profile.tensors.size();
  const double total_elements = static_cast<double>(profile.total_elements());
  std::vector<Emission> schedule;
  schedule.reserve(n);
  double done = 0;  // share of the compute finished, 0..1
  for (size_t k = 0; k < n; ++k) {
    const size_t tensor = n - 1 - k;
    if (spread == ComputeSpread::kBySize && total_elements > 0) {
      done += static_cast<double>(profile.tensors[tensor].elements) / total_elements;
    } else {
      done = static_cast<double>(k + 1) / static_cast<double>(n);
    }
    const auto at =
        k + 1 == n
            ? compute
            : std::chrono::microseconds(std::llround(static_cast<double>(compute.count()) * done));
    schedule.push_back({tensor, at});
  }
  return schedule;
}

}  // namespace ringd::model
