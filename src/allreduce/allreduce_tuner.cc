#include "allreduce/allreduce_tuner.h"

#include <algorithm>

#include "allreduce/recursive_doubling.h"
#include "common/collective_signature.h"
#include "common/logging.h"

namespace ringd::algo {
namespace {

// Median of the last `window` values.
double recent_median(const std::vector<double>& values, size_t window) {
  std::vector<double> recent(
      values.end() - static_cast<std::ptrdiff_t>(std::min(window, values.size())), values.end());
  std::sort(recent.begin(), recent.end());
  return recent[recent.size() / 2];
}

AllreduceAlgorithm other(AllreduceAlgorithm algorithm) {
  return algorithm == AllreduceAlgorithm::kRecursiveDoubling
             ? AllreduceAlgorithm::kHalvingDoubling
             : AllreduceAlgorithm::kRecursiveDoubling;
}

}  // namespace

int AllreduceTuner::class_of(size_t bytes) {
  int k = 0;
  while (k < 63 && (size_t{1} << k) < bytes) ++k;
  return k;
}

AllreduceTuner::Pick AllreduceTuner::pick(size_t bytes, int ranks, const Resolved& opts) {
  if (!opts.tune_allreduce || ranks < 4) return {};
  const size_t low = opts.small_allreduce_bytes / 16;
  const size_t high = std::min(opts.small_allreduce_bytes * 16, opts.ring_allreduce_bytes);
  if (bytes <= low || bytes > high) return {};
  const int size_class = class_of(bytes);
  Class& c = classes_[size_class];
  if (c.chosen != AllreduceAlgorithm::kAuto) return {c.chosen, -1};
  // Within the tuned range (<= the ring's threshold) the fixed rule says rd or hd.
  if (c.fixed_algorithm == AllreduceAlgorithm::kAuto)
    c.fixed_algorithm = allreduce_by_size(bytes, opts);
  return {c.calls < kFixedCalls ? c.fixed_algorithm : other(c.fixed_algorithm), size_class};
}

void AllreduceTuner::record(const Pick& pick, double seconds, Context& ctx, const Resolved& opts) {
  Class& c = classes_[pick.size_class];
  if (c.chosen != AllreduceAlgorithm::kAuto) return;
  (c.calls < kFixedCalls ? c.fixed : c.trial).push_back(seconds);
  if (++c.calls < kFixedCalls + kTrialCalls) return;
  // Sums over ranks of each rank's steady-state medians: the same two numbers on every rank, so
  // the same choice (recursive doubling gives every rank the same bits).
  double sums[2] = {recent_median(c.fixed, kWindow), recent_median(c.trial, kWindow)};
  const Operation agreement{
      ctx, ctx.next_operation_id(), opts,
      encode_signature({SignatureKind::kAllreduce, DataType::kFloat64, ReduceOp::kSum, 2, 2, 0})};
  recursive_doubling_allreduce(agreement, sums, 2, DataType::kFloat64, ReduceOp::kSum);
  c.chosen = sums[1] < sums[0] ? other(c.fixed_algorithm) : c.fixed_algorithm;
  RINGD_LOG(kDebug) << "rank " << ctx.rank() << ": allreduce of ("
                    << (size_t{1} << pick.size_class) / 2 << ", " << (size_t{1} << pick.size_class)
                    << "] bytes: " << allreduce_algorithm_name(c.fixed_algorithm) << " "
                    << sums[0] * 1e6 / ctx.size() << " us, "
                    << allreduce_algorithm_name(other(c.fixed_algorithm)) << " "
                    << sums[1] * 1e6 / ctx.size()
                    << " us (steady-state median, mean over ranks) -> "
                    << allreduce_algorithm_name(c.chosen);
  c.fixed.clear();
  c.trial.clear();
}

AllreduceAlgorithm AllreduceTuner::chosen(int size_class) const {
  const auto it = classes_.find(size_class);
  return it == classes_.end() ? AllreduceAlgorithm::kAuto : it->second.chosen;
}

}  // namespace ringd::algo
