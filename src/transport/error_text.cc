#include "transport/error_text.h"

#include <cstdio>

namespace ringd {

std::string describe_tag(uint64_t tag) {
  char text[96];
  std::snprintf(text, sizeof(text), "tag 0x%llx (operation %llu, message %llu)",
                static_cast<unsigned long long>(tag), static_cast<unsigned long long>(tag >> 24),
                static_cast<unsigned long long>(tag & 0xFFFFFF));
  return text;
}

Error capture_error(const std::function<void()>& thrower) {
  try {
    thrower();
  } catch (const Error& error) {
    return error;
  }
  return Error(ErrorCode::kInternal, "capture_error: nothing was thrown");
}

}  // namespace ringd
