// One direction-pair of the ibverbs transport: the message protocol between this rank and one
// peer, over a Link (an RC queue pair, or the tests' fake). Verbs-free.
//
// Memory (owned here, registered by the caller): the receive ring the peer writes into and the
// staging ring this side writes from, laid out by SlotGeometry (slot_format.h).
//
// Sends: isend queues the message; while credits allow (flow_control.h), each chunk is copied
// with its SlotHeader into a staging slot and written to the peer's slot of the same index. The
// send request completes when its last chunk is staged (the caller's buffer is free then).
// Receives: a chunk that arrives is matched against the FIRST posted receive (tag and size, else
// kMismatch), copied into the caller's buffer, and its slot is freed; freed slots go back to the
// sender as credits. A chunk that arrives before any receive is posted waits in its slot (the
// sender runs out of credits: backpressure, no unbounded buffering).
//
// The first failure (a failed completion, a corrupt slot, a mismatch, a timed-out wait, an abort)
// fails the channel: every pending and later request throws it. Local failures are also sent to
// the peer in the abort slot, so the peer fails with kPeerLost carrying the root cause.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ringd/error.h"
#include "transport/error_text.h"
#include "transport/ibverbs/flow_control.h"
#include "transport/ibverbs/link.h"
#include "transport/ibverbs/slot_format.h"

namespace ringd::ibverbs {

// One isend or irecv. Everything but the first four fields belongs to the channel's mutex.
struct ChannelOp {
  bool is_send = false;
  char* data = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;
  size_t progress = 0;   // payload bytes staged (send) or copied out (receive)
  bool started = false;  // first chunk staged (send) or matched (receive)
  bool done = false;
  std::optional<Error> error;
};

class Channel {
 public:
  static constexpr const char* kTransport = "ibverbs";
  Channel(int rank, int peer, const SlotGeometry& geometry);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int peer() const { return peer_; }
  const SlotGeometry& geometry() const { return geometry_; }
  uint8_t* memory() { return memory_.get(); }            // geometry().total_bytes(), page-aligned
  void set_description(const std::string& description);  // "rank 3 (node-b mlx5_0:1)"
  std::string description() const;

  // Takes the link and posts the receive work requests (SlotGeometry::queue_depth). Before any
  // peer can write: for verbs, before the queue pair reaches RTR.
  void attach(std::shared_ptr<Link> link);

  std::shared_ptr<ChannelOp> post(bool is_send, const void* data, size_t bytes, uint64_t tag);
  // Blocks (condition variable) until `op` is done; throws its error, or kTimeout (which fails the
  // channel and tells the peer) after `timeout`.
  void wait(ChannelOp& op, std::chrono::milliseconds timeout);
  // Pair::abort: fails every request and tells the peer why; never throws.
  void abort(const std::string& reason) noexcept;
  // Waits until the abort notice was written (or `limit` passed), so the peer sees the reason.
  void flush_abort(std::chrono::milliseconds limit);
  // Fails the channel without writing anything more (the context is being destroyed).
  void close(const Error& error);

  // The completion side (one thread; never concurrently with itself).
  void on_receive(uint32_t imm, uint32_t byte_len);
  void on_send_done(uint32_t cookie);
  // A failed work completion or asynchronous event on this channel's queue pair.
  void on_failure(const Error& error);

 private:
  void fail_locked(const Error& error, bool tell_peer);
  void send_abort_notice_locked(const std::string& reason);
  void pump_sends_locked();
  void pump_receives_locked();
  void return_credits_locked();
  void receive_data_locked(uint32_t slot, uint32_t byte_len);
  void receive_abort_locked(uint32_t byte_len);
  bool consume_chunk_locked(ChannelOp& op);  // false when the channel failed
  void protocol_fault_locked(const std::string& what);
  std::string describe_op(const ChannelOp& op) const;

  const int rank_;
  const int peer_;
  const SlotGeometry geometry_;
  std::unique_ptr<uint8_t, void (*)(void*)> memory_;

  mutable std::mutex mutex_;
  std::condition_variable completed_;
  std::string description_;
  std::shared_ptr<Link> link_;
  std::optional<Error> failed_;
  bool closed_ = false;      // no more writes: the link may be gone
  bool abort_sent_ = false;  // one abort notice per channel
  bool abort_in_flight_ = false;
  SendCredits send_credits_;
  ReceiveSlots receive_slots_;
  std::vector<uint32_t> arrived_bytes_;  // per slot: byte_len of the write that filled it
  std::deque<std::shared_ptr<ChannelOp>> sends_;
  std::deque<std::shared_ptr<ChannelOp>> receives_;
};

}  // namespace ringd::ibverbs
