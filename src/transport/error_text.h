// Error helpers shared by the tcp and ibverbs transports, whose progress threads build errors that
// are stored in a failed pair and thrown later by every waiter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ringd/error.h"

namespace ringd {

// Formats a tag as "tag 0x... (operation N, message M)" (see make_tag).
std::string describe_tag(uint64_t tag);

// Builds an Error with the same [file:line] breadcrumb RINGD_THROW would add, to store it.
Error capture_error(const std::function<void()>& thrower);
#define RINGD_MAKE_ERROR(code, stream_expr) \
  ::ringd::capture_error([&] { RINGD_THROW(code, stream_expr); })

}  // namespace ringd
