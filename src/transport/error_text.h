// Error helpers shared by the tcp and ibverbs transports, whose progress threads build errors that
// are stored in a failed pair and thrown later by every waiter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ringd/error.h"

namespace ringd {

// Formats a tag as "tag 0x... (operation N, message M)" (see make_tag), with the collective's
// signature after a ';' when it has one: "(operation N, message M; allreduce float sum ring, ...)".
std::string describe_tag(uint64_t tag);

// Why a message with tag `sent` did not match a receive posted for `expected`, for the end of a
// kMismatch message: the fields the two signatures disagree on ("the ranks disagree on the dtype
// (float here, int32 at the peer)"), or that the ranks run different collectives or sizes.
std::string tag_mismatch_cause(uint64_t expected, uint64_t sent);

// Starts an abort reason (Pair::abort) whose cause is a disagreement between ranks: a rank that
// learns of it from its peer ("peer rank P aborted: (mismatch across ranks) ...") fails with
// kMismatch, not kPeerLost (src/allreduce/collectives.cc), so every rank reports the mismatch.
constexpr const char* kMismatchAbortMark = "(mismatch across ranks) ";

// Builds an Error with the same [file:line] breadcrumb RINGD_THROW would add, to store it.
Error capture_error(const std::function<void()>& thrower);
#define RINGD_MAKE_ERROR(code, stream_expr) \
  ::ringd::capture_error([&] { RINGD_THROW(code, stream_expr); })

}  // namespace ringd
