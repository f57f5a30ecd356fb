// What the ranks of one collective must agree on, folded into 16 bits of every message tag (see
// make_tag in include/ringd/transport.h):
//
//   bits 15..13  collective   (1 allreduce, 2 broadcast, 3 allgather, 4 reduce_scatter,
//                              5 allgatherv; 0 = none)
//   bits 12..10  dtype        (DataType)
//   bits  9..7   op           (ReduceOp; 0 where the collective does not reduce)
//   bits  6..5   algorithm    (1 ring, 2 recursive doubling, 3 halving-doubling; 0 = not chosen)
//   bits  4..0   count/root   (a 5-bit hash of the element count and the broadcast root)
//
// Every transport checks the tag of each message against the receive it was posted for, so ranks
// that disagree on the collective, dtype, op or algorithm (or, with 31 in 32 odds, on the count or
// root where the byte counts happen to agree) fail at their first message with kMismatch, and the
// message names both sides' fields. It costs nothing on the wire: the tag travels anyway.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringd/types.h"

namespace ringd {

// The collective field of a signature (not the engine's ringd::CollectiveKind of
// include/ringd/engine.h: these are the transport-level collectives, reduce_scatter and
// allgatherv included).
enum class SignatureKind : uint8_t {
  kNone,
  kAllreduce,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kAllgatherv,
};

struct CollectiveSignature {
  SignatureKind kind = SignatureKind::kNone;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // ignored for broadcast and allgather
  uint8_t algorithm = 0;         // 0 none, 1 ring, 2 recursive doubling, 3 halving-doubling
  size_t count = 0;              // the collective's element count (per rank where it is per rank;
                                 // allgatherv: a hash of every rank's count)
  int root = 0;                  // broadcast only
};

uint16_t encode_signature(const CollectiveSignature& signature);

// "allreduce float sum rd, count/root hash 17"; "no collective" for 0.
std::string describe_signature(uint16_t bits);

// The fields in which two signatures differ, e.g. "dtype (float here, int32 at the peer)"; empty
// when they agree.
std::string signature_difference(uint16_t mine, uint16_t peer);

}  // namespace ringd
