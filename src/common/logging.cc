#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/host_name.h"
#include "common/tunables.h"

namespace ringd {
namespace {
std::atomic<int> g_rank{-1};

}  // namespace

void set_log_rank(int rank) { g_rank.store(rank); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= tunables().log_level; }

std::string format_log_line(const LogFields& fields, bool json) {
  static const char kLetters[] = {'E', 'W', 'I', 'D'};
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  const int level = static_cast<int>(fields.level);
  const std::time_t seconds = std::chrono::system_clock::to_time_t(fields.time);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(fields.time.time_since_epoch())
          .count() %
      1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char time_text[64];
  std::snprintf(time_text, sizeof(time_text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                utc.tm_sec, millis);
  if (json) {
    nlohmann::ordered_json object;
    object["time"] = time_text;
    object["level"] = kNames[level];
    object["host"] = fields.host;
    object["pid"] = fields.pid;
    if (fields.rank >= 0) object["rank"] = fields.rank;
    object["message"] = fields.message;
    // Invalid UTF-8 in a message (a peer's garbage quoted) is replaced, never thrown.
    return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  const std::string rank = fields.rank >= 0 ? " r" + std::to_string(fields.rank) : "";
  return "[ringd" + rank + " " + kLetters[level] + " " + time_text + " " + fields.host + " " +
         std::to_string(fields.pid) + "] " + fields.message + "\n";
}

void log_line(LogLevel level, const std::string& message) {
  LogFields fields;
  fields.level = level;
  fields.time = std::chrono::system_clock::now();
  fields.host = host_name();
  fields.pid = static_cast<int>(::getpid());
  fields.rank = g_rank.load();
  fields.message = message;
  const std::string line = format_log_line(fields, tunables().log_json);
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ringd
