// A host thread waiting for a CUDA event: it looks (cudaEventQuery), yielding the core between
// looks, for up to `spin`, and then sleeps in cudaEventSynchronize (ringd's events are made with
// cudaEventBlockingSync, so that sleep costs no core). The same trade as the tcp transport's
// RINGD_SPIN_US (transport/tcp/pair.h): a small copy or collective is done within a few
// microseconds, while waking a sleeping thread costs tens; the spin is bounded and yields, so
// ranks that outnumber the cores still progress. Only in CUDA builds.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>

namespace ringd::device {

// cudaSuccess once the event completed; the event's (or the query's) error otherwise. spin <= 0
// sleeps at once.
cudaError_t wait_for_event(cudaEvent_t event, std::chrono::microseconds spin);

// NcclLocalGroupOptions::spin_us resolved: -1 -> RINGD_SPIN_US; throws kInvalidArgument outside
// -1..10000.
std::chrono::microseconds event_spin(int spin_us);

}  // namespace ringd::device
