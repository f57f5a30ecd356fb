#include "runners/bench_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"

namespace ringd::runners {
namespace {

// Largest integer the dtype holds exactly with every smaller one.
double exact_limit(DataType dtype) {
  switch (dtype) {
    case DataType::kBFloat16: return 256;
    case DataType::kFloat16: return 2048;
    case DataType::kFloat32: return 16777216.0;
    case DataType::kFloat64: return 9007199254740992.0;
    case DataType::kInt32: return 2147483647.0;
    case DataType::kInt64: return 9007199254740992.0;
    case DataType::kUInt8: return 254;  // 255 is the sentinel
  }
  return 1;
}

// w(i) = i mod k with k small enough that n*(k-1) + 7 stays exact; v(i) = i mod 7.
size_t period(const CheckShape& shape) {
  const double per_rank = (exact_limit(shape.dtype) - 7) / shape.ranks + 1;
  return static_cast<size_t>(std::max(1.0, std::min(13.0, std::floor(per_rank))));
}

// The pattern's terms at element `index`, advanced one element at a time without divisions (a
// 64 MB buffer has 16 M elements).
class Cursor {
 public:
  Cursor(const CheckShape& shape, size_t index)
      : k_(period(shape)),
        n_(static_cast<size_t>(shape.ranks)),
        w_(index % k_),
        v_(index % 7),
        owner_(index % n_),
        m13_(index % 13) {}
  void advance() {
    if (++w_ == k_) w_ = 0;
    if (++v_ == 7) v_ = 0;
    if (++owner_ == n_) owner_ = 0;
    if (++m13_ == 13) m13_ = 0;
  }
  double w() const { return static_cast<double>(w_); }  // every rank's share
  double v() const { return static_cast<double>(v_); }  // the owner's extra
  bool owner(int rank) const { return owner_ == static_cast<size_t>(rank); }
  double m13() const { return static_cast<double>(m13_); }

 private:
  size_t k_, n_, w_, v_, owner_, m13_;
};

double reduce_input(ReduceOp op, const Cursor& c, int rank) {
  const bool owner = c.owner(rank);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return c.w() + (owner ? 1 + c.v() : 0);
    case ReduceOp::kMin:
    case ReduceOp::kMax: return c.w() + c.v() + (owner ? 0 : 1);
    case ReduceOp::kProd: return owner ? 1 + c.m13() + c.v() : 1;
  }
  return 0;
}

double reduce_expected(ReduceOp op, const Cursor& c, int ranks) {
  const double n = ranks;
  switch (op) {
    case ReduceOp::kSum: return n * c.w() + 1 + c.v();
    case ReduceOp::kAvg: return (n * c.w() + 1 + c.v()) / n;
    case ReduceOp::kMin: return c.w() + c.v();
    case ReduceOp::kMax: return ranks >= 2 ? c.w() + c.v() + 1 : c.w() + c.v();
    case ReduceOp::kProd: return 1 + c.m13() + c.v();
  }
  return 0;
}

// Broadcast and allgather: (5 rank + i) mod 13.
double plain_value(int rank, size_t index) {
  return static_cast<double>((5 * static_cast<size_t>(rank) + index) % 13);
}

void store(void* buffer, size_t index, DataType dtype, double value) {
  switch (dtype) {
    case DataType::kFloat32: static_cast<float*>(buffer)[index] = static_cast<float>(value); break;
    case DataType::kFloat64: static_cast<double*>(buffer)[index] = value; break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(buffer)[index] = half::f32_to_f16(static_cast<float>(value));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(buffer)[index] = half::f32_to_bf16(static_cast<float>(value));
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(buffer)[index] = static_cast<int32_t>(value);
      break;
    case DataType::kInt64:
      static_cast<int64_t*>(buffer)[index] = static_cast<int64_t>(value);
      break;
    case DataType::kUInt8:
      static_cast<uint8_t*>(buffer)[index] = static_cast<uint8_t>(value);
      break;
  }
}

double load(const void* buffer, size_t index, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return static_cast<const float*>(buffer)[index];
    case DataType::kFloat64: return static_cast<const double*>(buffer)[index];
    case DataType::kFloat16: return half::f16_to_f32(static_cast<const uint16_t*>(buffer)[index]);
    case DataType::kBFloat16: return half::bf16_to_f32(static_cast<const uint16_t*>(buffer)[index]);
    case DataType::kInt32: return static_cast<const int32_t*>(buffer)[index];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buffer)[index]);
    case DataType::kUInt8: return static_cast<const uint8_t*>(buffer)[index];
  }
  return 0;
}

// avg divides by the rank count: allow a few ulps (relative) of the dtype (rounding of 1/n and of
// the quotient); everything else must match exactly.
double tolerance(const CheckShape& shape, double expected) {
  if (!collective_reduces(shape.collective) || shape.op != ReduceOp::kAvg) return 0;
  double epsilon = 0;
  switch (shape.dtype) {
    case DataType::kFloat64: epsilon = 0x1p-50; break;
    case DataType::kFloat32: epsilon = 0x1p-21; break;
    case DataType::kFloat16: epsilon = 0x1p-8; break;
    case DataType::kBFloat16: epsilon = 0x1p-5; break;
    default: break;
  }
  return epsilon * std::fabs(expected);  // avg's expected value is at least 1/n, never 0
}

size_t input_elements(const CheckShape& shape) {
  return shape.collective == Collective::kReduceScatter
             ? shape.count_per_rank * static_cast<size_t>(shape.ranks)
             : shape.count_per_rank;
}

size_t output_elements(const CheckShape& shape) {
  return shape.collective == Collective::kAllgather
             ? shape.count_per_rank * static_cast<size_t>(shape.ranks)
             : shape.count_per_rank;
}

}  // namespace

double check_input_value(const CheckShape& shape, int rank, size_t index) {
  if (!collective_reduces(shape.collective)) return plain_value(rank, index);
  return reduce_input(shape.op, Cursor(shape, index), rank);
}

double check_expected_value(const CheckShape& shape, int rank, size_t index) {
  switch (shape.collective) {
    case Collective::kAllreduce:
      return reduce_expected(shape.op, Cursor(shape, index), shape.ranks);
    case Collective::kReduceScatter:
      return reduce_expected(
          shape.op, Cursor(shape, static_cast<size_t>(rank) * shape.count_per_rank + index),
          shape.ranks);
    case Collective::kBroadcast: return plain_value(shape.root, index);
    case Collective::kAllgather:
      return plain_value(static_cast<int>(index / shape.count_per_rank),
                         index % shape.count_per_rank);
  }
  return 0;
}

void fill_check_input(const CheckShape& shape, int rank, void* input) {
  if (shape.collective == Collective::kBroadcast && rank != shape.root) return;
  const size_t elements = input_elements(shape);
  if (!collective_reduces(shape.collective)) {
    for (size_t i = 0; i < elements; ++i) store(input, i, shape.dtype, plain_value(rank, i));
    return;
  }
  Cursor cursor(shape, 0);
  for (size_t i = 0; i < elements; ++i, cursor.advance()) {
    store(input, i, shape.dtype, reduce_input(shape.op, cursor, rank));
  }
}

int64_t count_wrong(const CheckShape& shape, int rank, const void* output) {
  const size_t elements = output_elements(shape);
  const bool reduces = collective_reduces(shape.collective);
  const size_t first = shape.collective == Collective::kReduceScatter
                           ? static_cast<size_t>(rank) * shape.count_per_rank
                           : 0;
  Cursor cursor(shape, first);
  int64_t wrong = 0;
  for (size_t i = 0; i < elements; ++i, cursor.advance()) {
    const double expected = reduces ? reduce_expected(shape.op, cursor, shape.ranks)
                                    : check_expected_value(shape, rank, i);
    const double got = load(output, i, shape.dtype);
    // NaN (the sentinel) fails both comparisons and counts as wrong.
    if (!(std::fabs(got - expected) <= tolerance(shape, expected))) ++wrong;
  }
  return wrong;
}

void fill_sentinel(void* buffer, size_t bytes) { std::memset(buffer, 0xFF, bytes); }

}  // namespace ringd::runners
