#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "common/tunables.h"

namespace ringd {
namespace {
std::atomic<int> g_rank{-1};
}  // namespace

void set_log_rank(int rank) { g_rank.store(rank); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= tunables().log_level; }

void log_line(LogLevel level, const std::string& message) {
  static const char kLetters[] = {'E', 'W', 'I', 'D'};
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm_utc{};
  gmtime_r(&seconds, &tm_utc);
  char prefix[64];
  const int rank = g_rank.load();
  if (rank >= 0) {
    std::snprintf(prefix, sizeof(prefix), "[ringd r%d %c %02d:%02d:%02d.%03d] ", rank,
                  kLetters[static_cast<int>(level)], tm_utc.tm_hour, tm_utc.tm_min, tm_utc.tm_sec,
                  millis);
  } else {
    std::snprintf(prefix, sizeof(prefix), "[ringd %c %02d:%02d:%02d.%03d] ",
                  kLetters[static_cast<int>(level)], tm_utc.tm_hour, tm_utc.tm_min, tm_utc.tm_sec,
                  millis);
  }
  std::string line = prefix + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ringd
