// Rate-limited log of refused connections, for the Acceptor. The first few rejections of each
// interval are logged one line each (as before); the rest are counted by source address and
// summed up in one line when the interval ends, so a flood of connections costs a few lines, not
// one line per connection (200 silent connections re-dialed for 30 s made ~40,000 lines).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "net/socket.h"

namespace ringd::net {

class RejectionLog {
 public:
  // `self` names the listener ("rank 0", "TCP store server 127.0.0.1:4000").
  RejectionLog(std::string self, std::chrono::milliseconds interval, size_t lines_per_interval)
      : self_(std::move(self)), interval_(interval), lines_per_interval_(lines_per_interval) {}

  // Logs "<self>: rejected connection from <from>: <reason>", or counts it when this interval's
  // lines are spent. Returns true when it started counting (the caller schedules flush() at
  // interval_end()).
  bool rejected(const std::string& from, const std::string& reason);
  // A warning that is not about one connection (accept failed), under the same budget.
  bool warn(const std::string& text);
  // Writes the summary of what was counted, if anything, and starts a new interval.
  void flush();
  Deadline interval_end() const { return interval_start_ + interval_; }
  // Lines written so far (tests bound it).
  size_t lines() const { return lines_; }

 private:
  bool spend_line();  // starts a new interval when due; false when this one's lines are spent

  const std::string self_;
  const std::chrono::milliseconds interval_;
  const size_t lines_per_interval_;
  Deadline interval_start_ = Clock::now();
  size_t lines_in_interval_ = 0;
  size_t lines_ = 0;
  size_t suppressed_ = 0;
  std::map<std::string, size_t> suppressed_by_source_;  // at most kMaxSources entries
  std::string last_reason_;
  bool counting_ = false;
};

// "10.0.0.7" of "10.0.0.7:4711" (the address a per-source limit counts).
std::string source_of(const std::string& address);

}  // namespace ringd::net
