// The TCP store's request/response protocol, spoken after the handshake of
// net/handshake.h (kind = store client). One request at a time per connection; all
// integers little-endian.
//
//   request:  magic/version u32, op u32 (1 set, 2 get, 3 add), key_bytes u32, timeout_ms u32
//             (get), value_bytes u64 (set, add), then the key, then the value
//   response: magic/version u32, status u32 (0 ok, 1 timeout, 2 error, 3 exists), value_bytes u64,
//             then the value (get; add: the value already stored, status 3) or the error text
//             (status 2)
//
// A get whose key is missing waits on the server until the key is set or timeout_ms passes. An add
// stores its value only when the key is missing (status 0), else answers status 3 with the stored
// value: ranks claim their place with it (rendezvous/job_membership.h). Keys under "ringd/" are
// the job's own records: a set that would replace one is refused (status 2).
// Keys are limited to kMaxKeyBytes and values to kMaxValueBytes; the server answers anything
// larger or malformed with status 2 and closes the connection. A value's memory on the server grows
// with the bytes that arrive (never with value_bytes alone), and the server holds at most its
// budget (TcpStoreServer's max_held_bytes, 256 MiB by default) of keys and values in all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/handshake.h"

namespace ringd::store_protocol {

constexpr uint32_t kMagic = 0x52530000u | net::kProtocolVersion;  // "RS" + version
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t{64} << 20;

enum class Op : uint32_t { kSet = 1, kGet = 2, kAdd = 3 };
enum class Status : uint32_t { kOk = 0, kTimeout = 1, kError = 2, kExists = 3 };

// Keys under this prefix can be created once and never replaced.
constexpr char kReservedPrefix[] = "ringd/";

struct RequestHeader {
  uint32_t magic;
  uint32_t op;
  uint32_t key_bytes;
  uint32_t timeout_ms;
  uint64_t value_bytes;
};
static_assert(sizeof(RequestHeader) == 24, "RequestHeader is 24 bytes on the wire");

struct ResponseHeader {
  uint32_t magic;
  uint32_t status;
  uint64_t value_bytes;
};
static_assert(sizeof(ResponseHeader) == 16, "ResponseHeader is 16 bytes on the wire");

}  // namespace ringd::store_protocol
