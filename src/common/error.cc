#include "ringd/error.h"

#include <cstring>

namespace ringd {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kPeerLost: return "peer lost";
    case ErrorCode::kProtocol: return "protocol error";
    case ErrorCode::kAuth: return "authentication failed";
    case ErrorCode::kMismatch: return "mismatch across ranks";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInternal: return "internal error";
    case ErrorCode::kDeadlock: return "deadlock across ranks";
  }
  return "unknown error";
}

namespace detail {

[[noreturn]] void throw_error(ErrorCode code, const std::string& message, const char* file,
                              int line) {
  const char* base = std::strrchr(file, '/');
  std::ostringstream os;
  os << message << " [" << (base ? base + 1 : file) << ":" << line << "]";
  throw Error(code, os.str());
}

}  // namespace detail
}  // namespace ringd
