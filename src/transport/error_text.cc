#include "transport/error_text.h"

#include <cstdio>

#include "common/collective_signature.h"
#include "ringd/transport.h"

namespace ringd {

std::string describe_tag(uint64_t tag) {
  char text[96];
  std::snprintf(text, sizeof(text), "tag 0x%llx (operation %llu, message %llu",
                static_cast<unsigned long long>(tag),
                static_cast<unsigned long long>(tag_operation(tag)),
                static_cast<unsigned long long>(tag_message(tag)));
  const uint16_t signature = tag_signature(tag);
  return text + (signature != 0 ? "; " + describe_signature(signature) : std::string()) + ")";
}

std::string tag_mismatch_cause(uint64_t expected, uint64_t sent) {
  const std::string difference = signature_difference(tag_signature(expected), tag_signature(sent));
  if (!difference.empty()) return "the ranks disagree on the " + difference;
  return "the ranks are running different collectives or disagree on sizes";
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
