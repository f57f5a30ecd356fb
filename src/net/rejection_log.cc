#include "net/rejection_log.h"

#include "common/logging.h"

namespace ringd::net {
namespace {
constexpr size_t kMaxSources = 8;  // sources named in a summary; the rest are "others"
}  // namespace

std::string source_of(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool RejectionLog::spend_line() {
  if (Clock::now() >= interval_end()) flush();
  if (lines_in_interval_ >= lines_per_interval_) return false;
  ++lines_in_interval_;
  ++lines_;
  return true;
}

bool RejectionLog::rejected(const std::string& from, const std::string& reason) {
  if (spend_line()) {
    RINGD_LOG(kWarn) << self_ << ": rejected connection from " << from << ": " << reason;
    return false;
  }
  ++suppressed_;
  const std::string source = source_of(from);
  if (suppressed_by_source_.count(source) || suppressed_by_source_.size() < kMaxSources) {
    ++suppressed_by_source_[source];
  } else {
    ++suppressed_by_source_["others"];
  }
  last_reason_ = reason;
  const bool started = !counting_;
  counting_ = true;
  return started;
}

bool RejectionLog::warn(const std::string& text) {
  if (spend_line()) {
    RINGD_LOG(kWarn) << self_ << ": " << text;
    return false;
  }
  ++suppressed_;
  last_reason_ = text;
  const bool started = !counting_;
  counting_ = true;
  return started;
}

void RejectionLog::flush() {
  if (suppressed_ > 0) {
    const auto seconds = std::chrono::duration<double>(Clock::now() - interval_start_).count();
    std::string sources;
    for (const auto& [source, count] : suppressed_by_source_) {
      sources += (sources.empty() ? "" : ", ") + std::to_string(count) + " from " + source;
    }
    RINGD_LOG(kWarn) << self_ << ": " << suppressed_ << " more connections rejected in the last "
                     << static_cast<int64_t>(seconds + 0.5) << " s, not logged one by one"
                     << (sources.empty() ? "" : " (" + sources + ")")
                     << "; the last reason: " << last_reason_
                     << " — something floods this port (a scanner, a stuck client, or a job "
                        "started with the wrong --rendezvous)";
    ++lines_;
  }
  interval_start_ = Clock::now();
  lines_in_interval_ = 0;
  suppressed_ = 0;
  suppressed_by_source_.clear();
  last_reason_.clear();
  counting_ = false;
}

}  // namespace ringd::net
