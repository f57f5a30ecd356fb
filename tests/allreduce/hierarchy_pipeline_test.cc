// The hierarchy's pipeline (allreduce/hierarchy_pipeline.h): how a buffer is cut into chunks;
// that every chunk goes in -> across -> out, the steps across nodes on the calling thread and the
// local steps on one other thread, in the documented order; that the local steps of neighbouring
// chunks really run while a step across nodes is in progress; and that the first error of
// either thread stops both and reaches the caller.
#include "allreduce/hierarchy_pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace ringd {
namespace {

using algo::cut_chunks;
using algo::ElementRange;

std::string describe(const std::vector<ElementRange>& chunks) {
  std::string text;
  for (const ElementRange& c : chunks) {
    text += (text.empty() ? "" : " ") + std::to_string(c.first) + "+" + std::to_string(c.count);
  }
  return text;
}

TEST(HierarchyPipeline, CutsWholeElementsAndFoldsAShortTail) {
  EXPECT_EQ(describe(cut_chunks(0, DataType::kFloat32, 400)), "");
  EXPECT_EQ(describe(cut_chunks(7, DataType::kFloat32, 400)), "0+7");
  EXPECT_EQ(describe(cut_chunks(300, DataType::kFloat32, 400)), "0+100 100+100 200+100");
  EXPECT_EQ(describe(cut_chunks(330, DataType::kFloat32, 400)), "0+100 100+100 200+100 300+30");
  EXPECT_EQ(describe(cut_chunks(320, DataType::kFloat32, 400)), "0+100 100+100 200+120");
  EXPECT_EQ(describe(cut_chunks(10, DataType::kFloat64, 20)), "0+2 2+2 4+2 6+2 8+2");
  EXPECT_EQ(describe(cut_chunks(3, DataType::kFloat64, 1)), "0+1 1+1 2+1");  // at least one
  EXPECT_EQ(describe(cut_chunks(1 << 20, DataType::kUInt8, SIZE_MAX)), "0+1048576");
  for (size_t count : {size_t{1}, size_t{99}, size_t{1000}, size_t{4097}}) {
    size_t next = 0;
    for (const ElementRange& c : cut_chunks(count, DataType::kFloat16, 64)) {
      EXPECT_EQ(c.first, next);
      EXPECT_GT(c.count, 0u);
      next += c.count;
    }
    EXPECT_EQ(next, count);
  }
}

// Records steps in order, with the thread each ran on.
struct Trace {
  std::mutex mutex;
  std::vector<std::string> steps;
  std::set<std::thread::id> local_threads;
  std::set<std::thread::id> across_threads;
  void add(const std::string& step, bool local) {
    std::lock_guard<std::mutex> lock(mutex);
    steps.push_back(step);
    (local ? local_threads : across_threads).insert(std::this_thread::get_id());
  }
  size_t position(const std::string& step) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::find(steps.begin(), steps.end(), step) - steps.begin();
  }
};

TEST(HierarchyPipeline, EveryChunkGoesInAcrossOutAndTheLocalStepsRunOnOneHelper) {
  for (size_t chunks : {1, 2, 3, 7}) {
    Trace trace;
    algo::run_pipelined(
        chunks, [&](size_t c) { trace.add("in " + std::to_string(c), true); },
        [&](size_t c) { trace.add("across " + std::to_string(c), false); },
        [&](size_t c) { trace.add("out " + std::to_string(c), true); });
    ASSERT_EQ(trace.steps.size(), 3 * chunks);
    for (size_t c = 0; c < chunks; ++c) {
      const std::string n = std::to_string(c);
      EXPECT_LT(trace.position("in " + n), trace.position("across " + n)) << chunks;
      EXPECT_LT(trace.position("across " + n), trace.position("out " + n)) << chunks;
      if (c > 0) {  // in order, on each thread
        const std::string before = std::to_string(c - 1);
        EXPECT_LT(trace.position("in " + before), trace.position("in " + n));
        EXPECT_LT(trace.position("across " + before), trace.position("across " + n));
        EXPECT_LT(trace.position("out " + before), trace.position("out " + n));
      }
      if (c + 1 < chunks) {  // the helper is never more than two chunks ahead
        EXPECT_LT(trace.position("out " + n), trace.position("in " + std::to_string(c + 2)))
            << chunks;
      }
    }
    EXPECT_EQ(trace.across_threads, std::set<std::thread::id>{std::this_thread::get_id()});
    ASSERT_EQ(trace.local_threads.size(), 1u);
    if (chunks == 1) {
      EXPECT_EQ(*trace.local_threads.begin(), std::this_thread::get_id());
    } else {
      EXPECT_NE(*trace.local_threads.begin(), std::this_thread::get_id());
    }
  }
}

// A latch the test can wait on with a deadline (a pipeline that serialised everything would
// never open it, and the test fails instead of hanging).
class Latch {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

TEST(HierarchyPipeline, LocalStepsOfNeighbouringChunksRunDuringTheStepAcross) {
  constexpr size_t kChunks = 5;
  std::vector<Latch> in_started(kChunks), out_started(kChunks);
  std::vector<bool> overlapped(kChunks, false);
  algo::run_pipelined(
      kChunks, [&](size_t c) { in_started[c].open(); },
      [&](size_t c) {
        // Step across on chunk c does not end before chunk c+1's in and chunk c-1's out began.
        bool ok = true;
        if (c + 1 < kChunks) ok = in_started[c + 1].wait() && ok;
        if (c > 0) ok = out_started[c - 1].wait() && ok;
        overlapped[c] = ok;
      },
      [&](size_t c) { out_started[c].open(); });
  for (size_t c = 0; c < kChunks; ++c) EXPECT_TRUE(overlapped[c]) << "chunk " << c;
}

TEST(HierarchyPipeline, AnErrorOnTheHelperStopsTheCaller) {
  std::vector<std::string> across;
  try {
    algo::run_pipelined(
        6,
        [&](size_t c) {
          if (c == 2) throw std::runtime_error("local step failed on chunk 2");
        },
        [&](size_t c) { across.push_back(std::to_string(c)); }, [](size_t) {});
    FAIL() << "the helper's error was lost";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "local step failed on chunk 2");
  }
  EXPECT_LE(across.size(), 2u) << "the step across ran on chunks whose local step never ran";
}

TEST(HierarchyPipeline, AnErrorOnTheCallerStopsTheHelper) {
  std::vector<size_t> outs;
  std::mutex mutex;
  try {
    algo::run_pipelined(
        6, [](size_t) {},
        [&](size_t c) {
          if (c == 1) throw std::runtime_error("network failed on chunk 1");
        },
        [&](size_t c) {
          std::lock_guard<std::mutex> lock(mutex);
          outs.push_back(c);
        });
    FAIL() << "the caller's error was lost";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "network failed on chunk 1");
  }
  EXPECT_LE(outs.size(), 1u) << "out ran for a chunk that never crossed the network";
}

TEST(HierarchyPipeline, WhenBothFailTheHelpersErrorIsReported) {
  Latch helper_failed;
  try {
    algo::run_pipelined(
        3,
        [&](size_t c) {
          if (c == 1) {
            helper_failed.open();
            throw std::runtime_error("helper");
          }
        },
        [&](size_t) {
          helper_failed.wait();
          throw std::runtime_error("caller");
        },
        [](size_t) {});
    FAIL() << "no error";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "helper");
  }
}

}  // namespace
}  // namespace ringd
