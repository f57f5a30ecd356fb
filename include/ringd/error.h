// ringd's one error model: every failure is a ringd::Error exception carrying an ErrorCode and a
// message that says what failed, where (rank, peer, tensor/operation) and what to do about it.
// Errors raised on background threads (transport I/O threads) are stored and rethrown to the
// caller on its next wait. See docs/errors.md.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ringd {

enum class ErrorCode {
  kInvalidArgument,  // caller passed something unusable (bad flag, bad size, unsupported op)
  kTimeout,          // a blocking wait ran past its deadline
  kPeerLost,         // a peer closed its connection or died
  kProtocol,         // a message was malformed, foreign, truncated or of another version
  kAuth,             // a peer failed the job-secret handshake
  kMismatch,         // ranks disagree (sizes, order of collectives)
  kIo,               // an operating-system call failed (socket, file)
  kUnavailable,      // a backend was not built in or has no device
  kInternal,         // a bug in ringd
  // No rank can make progress: each waits on collectives that another rank will not submit
  // before its own wait returns (different orders, uneven steps). A kind of mismatch: Python's
  // DeadlockError is a MismatchError.
  kDeadlock,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
[[noreturn]] void throw_error(ErrorCode code, const std::string& message, const char* file,
                              int line);
}  // namespace detail

}  // namespace ringd

// RINGD_THROW(kTimeout, "waited " << ms << " ms for peer " << peer);
// Appends a [file:line] breadcrumb so a report points at the throwing site.
// NOLINTBEGIN(bugprone-macro-parentheses): stream_expr is a chain of `<<` operands by design.
#define RINGD_THROW(code, stream_expr)                                                      \
  do {                                                                                      \
    std::ostringstream ringd_throw_os_;                                                     \
    ringd_throw_os_ << stream_expr;                                                         \
    ::ringd::detail::throw_error(::ringd::ErrorCode::code, ringd_throw_os_.str(), __FILE__, \
                                 __LINE__);                                                 \
  } while (0)

#define RINGD_CHECK_ARG(cond, stream_expr)                   \
  do {                                                       \
    if (!(cond)) RINGD_THROW(kInvalidArgument, stream_expr); \
  } while (0)
// NOLINTEND(bugprone-macro-parentheses)
