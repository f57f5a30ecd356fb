// The coordinator's two message patterns, point to point on the Context's pairs: every rank's
// byte string to rank 0 (gather), and rank 0's byte string to every rank (broadcast). Each is one
// operation on the Context (one operation id from next_operation_id(), so every rank must call
// them in the same order) and sends a 64-bit length, then the bytes:
//
//   gather:     rank r --[len][bytes]--> rank 0      (rank 0 posts every receive first)
//   broadcast:  rank 0 --[len][bytes]--> rank r      (star: one hop, however many ranks)
//
// Errors are ringd::Error from the transport (kPeerLost, kTimeout, kMismatch); the caller aborts
// the Context.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ringd/transport.h"

namespace ringd::fusion {

// Rank 0 returns every rank's bytes (index = rank; its own is `mine`); other ranks return {}.
std::vector<std::string> gather_to_root(Context& ctx, const std::string& mine,
                                        std::chrono::milliseconds timeout);

// Every rank returns rank 0's `bytes` (the argument is ignored elsewhere).
std::string broadcast_from_root(Context& ctx, const std::string& bytes,
                                std::chrono::milliseconds timeout);

}  // namespace ringd::fusion
