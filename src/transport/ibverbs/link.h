// What a Channel needs from the connection beneath it: a reliable, in-order way to write bytes
// from its own pair memory into the peer's, with a 32-bit immediate, and receive work requests
// to catch the peer's immediates. VerbsLink (queue_pair.h) is the RC queue pair; the unit tests
// use an in-process fake that copies between two channels' memories.
//
// Completions come back to the Channel (on_receive, on_send_done, on_failure) on another thread;
// post_* are called with the Channel's mutex held and must not call back into it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringd::ibverbs {

class Link {
 public:
  virtual ~Link() = default;
  // Writes `bytes` at `local_offset` of this side's pair memory to `remote_offset` of the peer's,
  // then delivers `imm` to one of the peer's receive work requests. The local completion reports
  // `cookie`. Throws ringd::Error (kIo) when the request cannot be posted.
  virtual void post_write(uint32_t cookie, size_t local_offset, size_t remote_offset,
                          uint32_t bytes, uint32_t imm) = 0;
  // Posts one receive work request (no buffer: immediates only; the data lands by RDMA write).
  virtual void post_receive() = 0;
};

}  // namespace ringd::ibverbs
