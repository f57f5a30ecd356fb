#include "fusion/timeline.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/logging.h"
#include "ringd/error.h"

namespace ringd::fusion {

// The writer thread's state: the file and the row (Chrome "thread") ids it has handed out.
struct Timeline::Writer {
  std::FILE* file = nullptr;
  bool first = true;
  std::unordered_map<std::string, int> rows;

  void write(const nlohmann::json& event) {
    const std::string text = event.dump();
    std::fputs(first ? "[\n" : ",\n", file);
    std::fputs(text.c_str(), file);
    first = false;
  }
  // The row's id; its first use also writes the metadata that names it.
  int row_id(const std::string& row, int pid) {
    const auto [it, inserted] = rows.try_emplace(row, static_cast<int>(rows.size()));
    if (inserted) {
      write({{"name", "thread_name"},
             {"ph", "M"},
             {"pid", pid},
             {"tid", it->second},
             {"args", {{"name", row}}}});
      write({{"name", "thread_sort_index"},
             {"ph", "M"},
             {"pid", pid},
             {"tid", it->second},
             {"args", {{"sort_index", it->second}}}});
    }
    return it->second;
  }
};

Timeline::Timeline(const std::string& path, int rank)
    : path_(path), rank_(rank), origin_(Clock::now()), writer_(std::make_unique<Writer>()) {
  writer_->file = std::fopen(path.c_str(), "w");
  if (!writer_->file) {
    RINGD_THROW(kIo, "rank " << rank << ": cannot write the timeline " << path
                             << " (RINGD_TIMELINE); check that the directory exists");
  }
  writer_->write({{"name", "process_name"},
                  {"ph", "M"},
                  {"pid", rank},
                  {"args", {{"name", "ringd rank " + std::to_string(rank)}}}});
  writer_->row_id("cycles", rank);
  thread_ = std::thread([this] { write_loop(); });
}

Timeline::~Timeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  ready_.notify_one();
  thread_.join();
  if (dropped_ > 0) {
    writer_->write(
        {{"name", "dropped events"},
         {"ph", "i"},
         {"s", "g"},
         {"pid", rank_},
         {"tid", 0},
         {"ts",
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - origin_).count()},
         {"args", {{"dropped", dropped_}}}});
    RINGD_LOG(kWarn) << "rank " << rank_ << ": the timeline " << path_ << " dropped " << dropped_
                     << " events (the writer could not keep up)";
  }
  std::fputs(writer_->first ? "[]\n" : "\n]\n", writer_->file);
  std::fclose(writer_->file);
}

void Timeline::span(const std::string& row, const char* name, Clock::time_point start,
                    Clock::time_point end, std::vector<TimelineArg> args) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  record(Event{row, name, 'X', duration_cast<microseconds>(start - origin_).count(),
               duration_cast<microseconds>(end - start).count(), std::move(args)});
}

void Timeline::instant(const std::string& row, const char* name, Clock::time_point at,
                       std::vector<TimelineArg> args) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  record(
      Event{row, name, 'i', duration_cast<microseconds>(at - origin_).count(), 0, std::move(args)});
}

void Timeline::record(Event event) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= kMaxQueuedEvents) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(event));
    // Half full within one cycle: start writing now rather than at the cycle's end.
    wake = queue_.size() == kMaxQueuedEvents / 2;
    flush_requested_ = flush_requested_ || wake;
  }
  if (wake) ready_.notify_one();
}

void Timeline::flush() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return;
    flush_requested_ = true;
  }
  ready_.notify_one();
}

uint64_t Timeline::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void Timeline::write_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    ready_.wait(lock, [&] { return closing_ || flush_requested_; });
    flush_requested_ = false;
    std::deque<Event> batch;
    batch.swap(queue_);
    const bool last = closing_;
    lock.unlock();
    for (const Event& event : batch) {
      nlohmann::json json = {{"name", event.name},
                             {"ph", std::string(1, event.phase)},
                             {"pid", rank_},
                             {"tid", writer_->row_id(event.row, rank_)},
                             {"ts", event.start_us}};
      if (event.phase == 'X') json["dur"] = event.duration_us;
      if (event.phase == 'i') json["s"] = "t";
      if (!event.args.empty()) {
        nlohmann::json args = nlohmann::json::object();
        for (const TimelineArg& arg : event.args) {
          std::visit([&](const auto& value) { args[arg.key] = value; }, arg.value);
        }
        json["args"] = std::move(args);
      }
      writer_->write(json);
    }
    std::fflush(writer_->file);
    lock.lock();
    if (last && queue_.empty()) return;
  }
}

}  // namespace ringd::fusion
