#include "allreduce/hierarchy_pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "common/tunables.h"

namespace ringd::algo {

size_t pipeline_chunk_bytes(const HierarchyOptions& options) {
  const size_t bytes = options.pipeline_chunk_bytes != 0 ? options.pipeline_chunk_bytes
                                                         : tunables().hierarchy_chunk_bytes;
  return bytes == 0 ? SIZE_MAX : bytes;
}

std::vector<ElementRange> cut_chunks(size_t count, DataType dtype, size_t chunk_bytes) {
  const size_t per_chunk = std::max<size_t>(1, chunk_bytes / dtype_size(dtype));
  std::vector<ElementRange> chunks;
  for (size_t first = 0; first < count; first += per_chunk) {
    chunks.push_back({first, std::min(per_chunk, count - first)});
  }
  if (chunks.size() > 1 && chunks.back().count < per_chunk / 4) {
    const size_t tail = chunks.back().count;  // too small to be worth a step of its own
    chunks.pop_back();
    chunks.back().count += tail;
  }
  return chunks;
}

namespace {

// What the two threads share.
struct Progress {
  std::mutex mutex;
  std::condition_variable changed;
  size_t local_in_done = 0;  // chunks 0..local_in_done-1 are through local_in
  size_t across_done = 0;    // chunks 0..across_done-1 are through across
  bool failed = false;

  void advance(size_t Progress::*counter, size_t value) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      this->*counter = value;
    }
    changed.notify_all();
  }
  // Waits until counter > chunk; false when the other thread failed first.
  bool await(size_t Progress::*counter, size_t chunk) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return this->*counter > chunk || failed; });
    return this->*counter > chunk;
  }
  void fail() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      failed = true;
    }
    changed.notify_all();
  }
};

}  // namespace

void run_pipelined(size_t chunks, const std::function<void(size_t)>& local_in,
                   const std::function<void(size_t)>& across,
                   const std::function<void(size_t)>& local_out) {
  if (chunks == 0) return;
  if (chunks == 1) {
    local_in(0);
    across(0);
    local_out(0);
    return;
  }
  Progress progress;
  std::exception_ptr helper_error;
  std::thread helper([&] {
    try {
      local_in(0);
      progress.advance(&Progress::local_in_done, 1);
      for (size_t c = 0; c < chunks; ++c) {
        if (c + 1 < chunks) {
          local_in(c + 1);
          progress.advance(&Progress::local_in_done, c + 2);
        }
        if (!progress.await(&Progress::across_done, c)) return;
        local_out(c);
      }
    } catch (...) {
      helper_error = std::current_exception();
      progress.fail();
    }
  });
  std::exception_ptr caller_error;
  try {
    for (size_t c = 0; c < chunks; ++c) {
      if (!progress.await(&Progress::local_in_done, c)) break;
      across(c);
      progress.advance(&Progress::across_done, c + 1);
    }
  } catch (...) {
    caller_error = std::current_exception();
    progress.fail();
  }
  helper.join();
  if (helper_error) std::rethrow_exception(helper_error);
  if (caller_error) std::rethrow_exception(caller_error);
}

}  // namespace ringd::algo
