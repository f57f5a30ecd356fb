#include "allreduce/allreduce_tuner.h"

#include <algorithm>

#include "allreduce/recursive_doubling.h"
#include "common/logging.h"

namespace ringd::algo {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
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
  const Class& c = classes_[size_class];
  if (c.chosen != AllreduceAlgorithm::kAuto) return {c.chosen, -1};
  return {c.rd.size() <= c.hd.size() ? AllreduceAlgorithm::kRecursiveDoubling
                                     : AllreduceAlgorithm::kHalvingDoubling,
          size_class};
}

void AllreduceTuner::record(const Pick& pick, double seconds, Context& ctx, const Resolved& opts) {
  Class& c = classes_[pick.size_class];
  if (c.chosen != AllreduceAlgorithm::kAuto) return;
  (pick.algorithm == AllreduceAlgorithm::kRecursiveDoubling ? c.rd : c.hd).push_back(seconds);
  if (c.rd.size() < kSamples || c.hd.size() < kSamples) return;
  // Sums over ranks of each rank's medians: the same two numbers on every rank, so the same
  // choice (recursive doubling gives every rank the same bits).
  double sums[2] = {median(c.rd), median(c.hd)};
  const Operation agreement{ctx, ctx.next_operation_id(), opts};
  recursive_doubling_allreduce(agreement, sums, 2, DataType::kFloat64, ReduceOp::kSum);
  c.chosen = sums[1] < sums[0] ? AllreduceAlgorithm::kHalvingDoubling
                               : AllreduceAlgorithm::kRecursiveDoubling;
  RINGD_LOG(kDebug) << "rank " << ctx.rank() << ": allreduce of ("
                    << (size_t{1} << pick.size_class) / 2 << ", " << (size_t{1} << pick.size_class)
                    << "] bytes: recursive doubling " << sums[0] * 1e6 / ctx.size()
                    << " us, halving-doubling " << sums[1] * 1e6 / ctx.size()
                    << " us (median, mean over ranks) -> " << allreduce_algorithm_name(c.chosen);
}

AllreduceAlgorithm AllreduceTuner::chosen(int size_class) const {
  const auto it = classes_.find(size_class);
  return it == classes_.end() ? AllreduceAlgorithm::kAuto : it->second.chosen;
}

}  // namespace ringd::algo
