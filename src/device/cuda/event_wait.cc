#include "device/cuda/event_wait.h"

#include <sched.h>

#include "common/tunables.h"
#include "ringd/error.h"

namespace ringd::device {

cudaError_t wait_for_event(cudaEvent_t event, std::chrono::microseconds spin) {
  using Clock = std::chrono::steady_clock;
  if (spin.count() > 0) {
    const Clock::time_point spin_end = Clock::now() + spin;
    for (;;) {
      const cudaError_t status = cudaEventQuery(event);
      if (status != cudaErrorNotReady) return status;
      if (Clock::now() >= spin_end) break;
      sched_yield();
    }
  }
  return cudaEventSynchronize(event);
}

std::chrono::microseconds event_spin(int spin_us) {
  if (spin_us == -1) return std::chrono::microseconds(tunables().spin_us);
  RINGD_CHECK_ARG(spin_us >= 0 && spin_us <= 10000, "nccl local group: spin_us "
                                                        << spin_us
                                                        << "; use 0..10000 microseconds, or -1 for "
                                                           "RINGD_SPIN_US");
  return std::chrono::microseconds(spin_us);
}

}  // namespace ringd::device
