#include "fusion/stall_inspector.h"

#include <iomanip>
#include <sstream>

#include "common/logging.h"

namespace ringd::fusion {
namespace {

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

}  // namespace

std::string describe_stalls(const std::vector<StalledTensor>& tensors) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const StalledTensor& t = tensors[i];
    os << (i ? "; " : "") << "tensor '" << t.name << "' has waited " << t.waited_s
       << " s: submitted by " << ranks_text(t.submitted_by) << ", waiting on "
       << ranks_text(t.missing_on);
  }
  return os.str();
}

StallInspector::StallInspector(int rank, double warning_s, double shutdown_s,
                               std::function<void(const StallReport&)> on_stall)
    : rank_(rank), warning_(warning_s), shutdown_(shutdown_s), on_stall_(std::move(on_stall)) {}

bool StallInspector::hit_is_stale(Clock::time_point submitted, Clock::time_point now) const {
  if (!enabled()) return false;
  const auto limit = warning_.count() > 0 ? warning_ : shutdown_;
  return now - submitted >= limit;
}

std::string StallInspector::inspect(const Coordinator& coordinator, Clock::time_point now) {
  if (rank_ != 0 || !enabled() || coordinator.waiting() == 0) return "";
  const bool shutting_down =
      shutdown_.count() > 0 && !coordinator.waiting_longer_than(now, shutdown_).empty();
  if (!shutting_down && (warning_.count() == 0 || now < next_report_)) return "";
  StallReport report;
  report.tensors = coordinator.waiting_longer_than(now, shutting_down ? shutdown_ : warning_);
  if (report.tensors.empty()) return "";
  report.shutting_down = shutting_down;
  std::ostringstream os;
  os << "rank 0: stalled: " << describe_stalls(report.tensors) << ". Some ranks did not submit "
     << (report.tensors.size() == 1 ? "this tensor" : "these tensors")
     << " (a conditional or renamed collective, or a stuck rank)";
  if (shutting_down) {
    os << "; RINGD_STALL_SHUTDOWN_S (" << shutdown_.count()
       << " s) has passed, so every rank fails them and stops its engine";
  } else {
    os << " (reported every RINGD_STALL_WARNING_S = " << warning_.count() << " s)";
  }
  report.message = os.str();
  RINGD_LOG(kWarn) << report.message;
  if (warning_.count() > 0) {
    next_report_ = now + std::chrono::duration_cast<Clock::duration>(warning_);
  }
  if (on_stall_) on_stall_(report);
  return shutting_down ? report.message : "";
}

}  // namespace ringd::fusion
