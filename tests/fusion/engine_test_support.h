// Shared by the fusion engine tests: engine options that keep tests fast, a workload of named
// tensors with closed-form expected results, and a bounded wait for test-level signals.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringd/engine.h"
#include "ringd/error.h"
#include "testing/check.h"
#include "testing/values.h"

namespace ringd::testing {

inline EngineOptions test_engine_options() {
  EngineOptions options;
  options.cycle_time_ms = 0.5;
  options.stall_warning_s = 0;
  options.stall_shutdown_s = 0;
  options.timeline_path = "";
  options.copy_threads = 2;
  return options;
}

// One named allreduce of the workload: its inputs on this rank, and its expected result.
struct WorkItem {
  std::string name;
  DataType dtype;
  ReduceOp op;
  size_t count;
  std::vector<unsigned char> buffer;

  Tensor tensor() { return Tensor{buffer.data(), dtype, {static_cast<int64_t>(count)}}; }
  void reset(int rank) { buffer = make_input(op, rank, count, dtype); }
  // "" when the buffer holds the closed-form result over `size` ranks.
  std::string check(int size) const {
    const double tolerance = op == ReduceOp::kAvg ? avg_tolerance(dtype) : 0;
    const std::string bad = first_mismatch(buffer.data(), count, dtype, tolerance,
                                           [&](size_t i) { return expected_value(op, size, i); });
    return bad.empty() ? "" : name + ": " + bad;
  }
};

// `tensors` allreduces over every dtype and op (avg on floats only) and a spread of sizes,
// including empty and single-element tensors.
inline std::vector<WorkItem> make_workload(int rank, int tensors) {
  static const size_t kCounts[] = {0, 1, 3, 17, 250, 1000, 4099, 20000};
  std::vector<WorkItem> items;
  for (int i = 0; i < tensors; ++i) {
    const DataType dtype = kAllDataTypes[i % std::size(kAllDataTypes)];
    ReduceOp op = kAllReduceOps[(i / 2) % std::size(kAllReduceOps)];
    if (!reduce_op_supported(dtype, op)) op = ReduceOp::kMax;
    WorkItem item{"grad." + std::to_string(i), dtype, op, kCounts[i % std::size(kCounts)], {}};
    item.reset(rank);
    items.push_back(std::move(item));
  }
  return items;
}

// Submits the workload in an order of this rank's own, waits, checks every result and returns
// all result bytes (to compare across ranks).
inline std::vector<unsigned char> run_workload_step(Engine& engine, std::vector<WorkItem>& items,
                                                    uint32_t seed) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<Handle> handles(items.size());
  for (size_t i : order) {
    items[i].reset(engine.rank());
    handles[i] = engine.allreduce_async(items[i].name, items[i].tensor(), items[i].op);
    if (rng() % 4 == 0) std::this_thread::yield();
  }
  std::vector<unsigned char> all;
  for (size_t i = 0; i < items.size(); ++i) {
    handles[i].wait();
    EXPECT_EQ(items[i].check(engine.size()), "") << "rank " << engine.rank();
    all.insert(all.end(), items[i].buffer.begin(), items[i].buffer.end());
  }
  return all;
}

// Submits the items as one group (so they run in one cycle and fuse where they can), waits and
// checks every result.
inline void run_group_step(Engine& engine, std::vector<WorkItem>& items, const std::string& group) {
  std::vector<Submission> members;
  for (WorkItem& item : items) {
    item.reset(engine.rank());
    Submission s;
    s.name = item.name;
    s.tensor = item.tensor();
    s.op = item.op;
    members.push_back(std::move(s));
  }
  for (Handle& handle : engine.submit_group(group, std::move(members))) handle.wait();
  for (const WorkItem& item : items) {
    EXPECT_EQ(item.check(engine.size()), "") << "rank " << engine.rank();
  }
}

// `n` float32 sum allreduces of `count` elements each ("t0", "t1", ...).
inline std::vector<WorkItem> float_items(int rank, int n, size_t count) {
  std::vector<WorkItem> items;
  for (int i = 0; i < n; ++i) {
    WorkItem item{"t" + std::to_string(i), DataType::kFloat32, ReduceOp::kSum, count, {}};
    item.reset(rank);
    items.push_back(std::move(item));
  }
  return items;
}

// A one-shot signal between rank threads with a bounded wait (a test fails instead of hanging).
class Signal {
 public:
  void set() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      set_ = true;
    }
    cv_.notify_all();
  }
  bool wait(std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Runs `body` and returns the ringd::Error it threw (fails the test if it threw nothing).
template <typename Body>
Error expect_error(Body body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected a ringd::Error";
  return Error(ErrorCode::kInternal, "no error");
}

}  // namespace ringd::testing
