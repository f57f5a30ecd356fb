// Minimal thread-safe logging to stderr: one line per message, written with a single write() so
// lines from threads and processes do not interleave. Prefix: "[ringd r<rank> W hh:mm:ss.mmm]".
#pragma once

#include <sstream>

namespace ringd {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// Set once the process knows its rank (-1 = unknown, omitted from the prefix).
void set_log_rank(int rank);
bool log_enabled(LogLevel level);
void log_line(LogLevel level, const std::string& message);

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
