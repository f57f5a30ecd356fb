// The transport interface every collective is written against: a Context (this rank, the world
// size, one Pair per peer) and asynchronous point-to-point messages on each Pair.
//
// Contract shared by every backend (inproc, tcp, mpi, ibverbs):
//  * Messages on one Pair and one direction are delivered in the order they were posted, and
//    matched against receives in the order those were posted. Each message carries a 64-bit tag;
//    a receive whose expected tag or size differs from the arriving message fails with kMismatch
//    (the ranks are running different collectives) instead of returning wrong data.
//  * isend/irecv never block. The buffer must stay valid and untouched until the request is done.
//  * Receives land directly in the caller's buffer (no intermediate copy where the backend can
//    avoid one).
//  * Request::wait blocks without busy-polling and throws ringd::Error: kTimeout when the timeout
//    passes, kPeerLost when the peer's process or connection is gone, kProtocol/kMismatch when the
//    stream is corrupt. Once a Pair has failed, every later request on it fails the same way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringd {

class Request {
 public:
  virtual ~Request() = default;
  // Blocks until the operation completes; throws ringd::Error on failure or after `timeout`.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
};
using RequestPtr = std::unique_ptr<Request>;

class Pair {
 public:
  virtual ~Pair() = default;
  virtual int peer_rank() const = 0;
  // Human-readable description of the peer for error messages, e.g. "rank 3 (10.0.0.4:41000)".
  virtual std::string peer_description() const = 0;
  virtual RequestPtr isend(const void* data, size_t bytes, uint64_t tag) = 0;
  virtual RequestPtr irecv(void* data, size_t bytes, uint64_t tag) = 0;
  // Best effort, never throws: tells the peer this rank is giving up and why, so the peer fails
  // with kPeerLost carrying `reason` (which names the root cause) instead of only "connection
  // lost". Pending and later requests on this pair fail.
  virtual void abort(const std::string& reason) { (void)reason; }
};

// A group of `size` ranks with a Pair to every peer. Collectives take a Context&; one Context must
// be used by one thread at a time (ranks are independent threads or processes).
class Context {
 public:
  // `pairs` has `size` entries; pairs[rank] is null. `keepalive` owns whatever the pairs need
  // (sockets, I/O thread, hub) and is destroyed after them.
  Context(int rank, int size, std::string transport_name, std::vector<std::unique_ptr<Pair>> pairs,
          std::shared_ptr<void> keepalive, std::chrono::milliseconds timeout);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& transport_name() const { return transport_name_; }
  Pair& pair(int peer);
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // Sequence number of collectives started on this context; identical on every rank as long as
  // all ranks call the same collectives in the same order. Used to build message tags.
  uint64_t next_operation_id() { return ++operation_id_; }

  // After a collective fails the message streams are no longer in step, so the context is
  // unusable: abort() tells every peer why (see Pair::abort) and makes later collectives fail
  // at once with the same reason. check_usable() throws kPeerLost if the context was aborted.
  void abort(const std::string& reason);
  void check_usable() const;

  // Scratch memory reused across collectives (grows, never shrinks). At least `bytes` long,
  // 64-byte aligned.
  void* scratch(size_t bytes);
  // The same kind of memory, for code around a collective rather than inside one (allreduce_list
  // joins small buffers here, then allreduces them, which uses scratch()).
  void* staging(size_t bytes);

  // State the collectives keep per context (the allreduce tuner's measurements); theirs to create.
  std::shared_ptr<void>& collective_state() { return collective_state_; }

 private:
  int rank_;
  int size_;
  std::string transport_name_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::shared_ptr<void> keepalive_;
  std::chrono::milliseconds timeout_;
  uint64_t operation_id_ = 0;
  std::string abort_reason_;
  // 64-byte aligned memory that grows to the largest request and is kept.
  struct GrowingBuffer {
    std::unique_ptr<unsigned char, void (*)(void*)> memory{nullptr, nullptr};
    size_t bytes = 0;
    void* reserve(size_t wanted, int rank, const char* what);
  };
  GrowingBuffer scratch_;
  GrowingBuffer staging_;
  std::shared_ptr<void> collective_state_;
};

// Message tags, 64 bits:
//   [63..40] the operation id's low 24 bits (the same on every rank: Context::next_operation_id)
//   [39..24] the collective's signature: what all ranks must agree on (collective, dtype, op,
//            algorithm, a hash of count and root; src/common/collective_signature.h), 0 for other
//            traffic. Every transport compares a message's tag with its posted receive's, so a rank
//            with another dtype or op fails with kMismatch at its first message, at no cost.
//   [23..0]  a per-operation message index
inline uint64_t make_tag(uint64_t operation_id, uint64_t index, uint16_t signature = 0) {
  return ((operation_id & 0xFFFFFF) << 40) | (uint64_t{signature} << 24) | (index & 0xFFFFFF);
}
inline uint64_t tag_operation(uint64_t tag) { return tag >> 40; }
inline uint16_t tag_signature(uint64_t tag) { return static_cast<uint16_t>(tag >> 24); }
inline uint64_t tag_message(uint64_t tag) { return tag & 0xFFFFFF; }

}  // namespace ringd
