// Minimal thread-safe logging to stderr: one line per message, written with a single write() so
// lines from threads and processes do not interleave. Each line says when (UTC date and time),
// where (host, pid, rank) and how bad, so logs gathered from many pods read together:
//   [ringd r0 W 2026-11-25T11:59:17.123Z ringd-0 4711] rank 0: ...
// or, with RINGD_LOG_FORMAT=json, one JSON object per line:
//   {"time":"2026-11-25T11:59:17.123Z","level":"warn","host":"ringd-0","pid":4711,"rank":0,
//    "message":"rank 0: ..."}
#pragma once

#include <chrono>
#include <sstream>
#include <string>

namespace ringd {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Set once the process knows its rank (-1 = unknown, omitted from the prefix).
void set_log_rank(int rank);
bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& message);

// What one log line holds; format_log_line renders it as text or JSON, ending in '\n'.
struct LogFields {
  LogLevel level = LogLevel::kInfo;
  std::chrono::system_clock::time_point time;
  std::string host;
  int pid = 0;
  int rank = -1;  // -1: not known yet (left out)
  std::string message;
};
std::string format_log_line(const LogFields& fields, bool json);

namespace detail {
class LogMessage {
 public:
  explicit LogMessage(LogLevel level) : level_(level) {}
  ~LogMessage() { log_line(level_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace ringd

#define RINGD_LOG(level)                                 \
  if (!::ringd::log_enabled(::ringd::LogLevel::level)) { \
  } else                                                 \
    ::ringd::detail::LogMessage(::ringd::LogLevel::level).stream()
