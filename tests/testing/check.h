// Result checking shared by the collective tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "testing/values.h"

namespace ringd::testing {

// Compares buf[0..count) with expected(i); returns a description of the first mismatch, or "".
template <typename Expected>
std::string first_mismatch(const void* buf, size_t count, DataType dtype, double tolerance,
                           Expected expected) {
  for (size_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double got = load_value(buf, i, dtype);
    const bool ok =
        tolerance == 0 ? got == want : std::fabs(got - want) <= tolerance * std::fabs(want);
    if (!ok) {
      std::ostringstream os;
      os << "element " << i << " of " << count << " (" << dtype_name(dtype) << "): got " << got
         << ", want " << want;
      return os.str();
    }
  }
  return "";
}

// Collects each rank's output so the test can assert all ranks are bitwise equal.
class RankOutputs {
 public:
  explicit RankOutputs(int size) : outputs_(size) {}
  void put(int rank, const void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto* p = static_cast<const unsigned char*>(data);
    outputs_[rank].assign(p, p + bytes);
  }
  const std::vector<unsigned char>& bytes(int rank) const { return outputs_[rank]; }
  // "" when every rank's bytes equal rank 0's.
  std::string differences() const {
    for (size_t r = 1; r < outputs_.size(); ++r) {
      if (outputs_[r] != outputs_[0]) return "rank " + std::to_string(r) + " differs from rank 0";
    }
    return "";
  }

 private:
  std::mutex mutex_;
  std::vector<std::vector<unsigned char>> outputs_;
};

}  // namespace ringd::testing
