// The one error wrapper of every collective, flat (collectives.cc) and hierarchical
// (hierarchical_*.cc): what failed, on which rank, told to the peers too.
#pragma once

#include <sstream>
#include <string>

#include "ringd/error.h"
#include "ringd/transport.h"
#include "transport/error_text.h"

namespace ringd::algo {

// Runs body(); if it throws ringd::Error, aborts `ctx` with the cause (so the peers learn it
// instead of only a lost connection) and rethrows the same code with "rank R: <describe> failed: "
// in front. A mismatch — this rank's, or a peer's abort marked as one — stays kMismatch, and the
// abort carries the mark on to the peers.
template <typename Body, typename Describe>
void with_context(Context& ctx, Body&& body, Describe&& describe) {
  try {
    body();
  } catch (const Error& error) {
    std::ostringstream os;
    describe(os);
    const std::string message =
        "rank " + std::to_string(ctx.rank()) + ": " + os.str() + " failed: " + error.what();
    const bool mismatch = error.code() == ErrorCode::kMismatch ||
                          (error.code() == ErrorCode::kPeerLost &&
                           std::string(error.what()).find(kMismatchAbortMark) != std::string::npos);
    ctx.abort(mismatch ? kMismatchAbortMark + message : message);
    throw Error(mismatch ? ErrorCode::kMismatch : error.code(), message);
  }
}

}  // namespace ringd::algo
