// NCCL's names for ringd's dtypes, ops and failures (only in builds with NCCL). Every ringd dtype
// and op has an NCCL twin in NCCL >= 2.10 (bfloat16 and ncclAvg arrived there); with an older
// NCCL those two throw kUnavailable. Pure mappings: no GPU needed, unit-tested without one.
//
//   RINGD_NCCL_CHECK(ncclGroupEnd(), "nccl local group: reduce_to_leader");
//
// turns a failed NCCL call into ringd::Error at the call site: invalid argument/usage ->
// kInvalidArgument (usually a buffer that is not device memory of its device), a CUDA or system
// failure inside NCCL -> kIo, a remote peer's failure -> kPeerLost, anything else -> kInternal.
#pragma once

#include <nccl.h>

#include <sstream>
#include <string>

#include "ringd/error.h"
#include "ringd/types.h"

namespace ringd {

// Throws kInvalidArgument for avg on an integer type (as everywhere in ringd), kUnavailable for
// what the NCCL this was built against cannot do.
ncclDataType_t nccl_data_type(DataType dtype);
ncclRedOp_t nccl_reduce_op(ReduceOp op, DataType dtype);

ErrorCode nccl_error_code(ncclResult_t result);
// "<call> failed: <ncclGetErrorString> (<ncclGetLastError>)" plus what to do.
std::string nccl_failure(const char* call, ncclResult_t result);

}  // namespace ringd

// NOLINTBEGIN(bugprone-macro-parentheses): stream_expr is a chain of `<<` operands by design.
#define RINGD_NCCL_CHECK(call, stream_expr)                                                      \
  do {                                                                                           \
    const ncclResult_t ringd_nccl_status_ = (call);                                              \
    if (ringd_nccl_status_ != ncclSuccess) {                                                     \
      std::ostringstream ringd_nccl_os_;                                                         \
      ringd_nccl_os_ << stream_expr << ": " << ::ringd::nccl_failure(#call, ringd_nccl_status_); \
      ::ringd::detail::throw_error(::ringd::nccl_error_code(ringd_nccl_status_),                 \
                                   ringd_nccl_os_.str(), __FILE__, __LINE__);                    \
    }                                                                                            \
  } while (0)
// NOLINTEND(bugprone-macro-parentheses)
