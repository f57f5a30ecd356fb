// The timeline: a Chrome-trace JSON file (open it in Perfetto or chrome://tracing) with one row
// per tensor and a "cycles" row:
//
//   cycles    [cycle 41: negotiate | run ]      [cycle 42 ...
//   fc.weight  * [negotiate ]  fused [memcpy in][allreduce][memcpy out] * done
//   fc.bias      * [negotiate ] fused [memcpy in][allreduce][memcpy out] * done
//              submitted
//
// Threads that record events only append them to a bounded queue under a mutex; a separate
// writer thread turns them into JSON and writes the file, so recording never waits for the disk.
// When the queue is full (the disk is slower than the engine), events are dropped and counted; the
// count is the last event in the file. The file is a JSON array, closed when the timeline is
// destroyed (an unclosed array from a crashed process still loads in chrome://tracing).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace ringd::fusion {

struct TimelineArg {
  std::string key;
  std::variant<int64_t, std::string> value;
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxQueuedEvents = 1 << 16;

  // Opens (truncates) `path`; throws ringd::Error(kIo) naming it when it cannot be written.
  Timeline(const std::string& path, int rank);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A phase on `row` from `start` to `end`.
  void span(const std::string& row, const char* name, Clock::time_point start,
            Clock::time_point end, std::vector<TimelineArg> args = {});
  // A moment on `row`.
  void instant(const std::string& row, const char* name, Clock::time_point at,
               std::vector<TimelineArg> args = {});
  // Lets the writer catch up now (called once per cycle); never blocks on the disk.
  void flush();

  uint64_t dropped() const;

 private:
  struct Event {
    std::string row;
    const char* name;
    char phase;  // 'X' span, 'i' instant
    int64_t start_us;
    int64_t duration_us;
    std::vector<TimelineArg> args;
  };
  void record(Event event);
  void write_loop();

  const std::string path_;
  const int rank_;
  const Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> queue_;
  uint64_t dropped_ = 0;
  bool closing_ = false;
  bool flush_requested_ = false;
  struct Writer;
  std::unique_ptr<Writer> writer_;
  std::thread thread_;
};

}  // namespace ringd::fusion
