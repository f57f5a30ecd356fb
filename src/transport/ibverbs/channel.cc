// Channel's thread-facing half: posting, waiting, failing, aborting. The completion side (what
// happens when the peer's writes and our own writes complete) is channel_progress.cc.
#include "transport/ibverbs/channel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ringd::ibverbs {

namespace {

uint8_t* allocate_pair_memory(const SlotGeometry& geometry) {
  constexpr size_t kPage = 4096;
  const size_t bytes = (geometry.total_bytes() + kPage - 1) / kPage * kPage;
  void* memory = std::aligned_alloc(kPage, bytes);
  if (!memory) RINGD_THROW(kIo, "ibverbs: cannot allocate " << bytes << " bytes of pair memory");
  std::memset(memory, 0, bytes);  // touched before registration, and no stale bytes on the wire
  return static_cast<uint8_t*>(memory);
}

}  // namespace

Channel::Channel(int rank, int peer, const SlotGeometry& geometry)
    : rank_(rank),
      peer_(peer),
      geometry_(geometry),
      memory_(allocate_pair_memory(geometry), std::free),
      description_("rank " + std::to_string(peer)),
      send_credits_(geometry.slots),
      receive_slots_(geometry.slots, default_credit_batch(geometry.slots)),
      arrived_bytes_(geometry.slots, 0) {}

Channel::~Channel() = default;

void Channel::set_description(const std::string& description) {
  std::lock_guard<std::mutex> lock(mutex_);
  description_ = description;
}

std::string Channel::description() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return description_;
}

std::string Channel::describe_op(const ChannelOp& op) const {
  return std::to_string(op.bytes) + " bytes (" + describe_tag(op.tag) + ") " +
         (op.is_send ? "to" : "from") + " peer " + description_;
}

void Channel::attach(std::shared_ptr<Link> link) {
  std::lock_guard<std::mutex> lock(mutex_);
  link_ = std::move(link);
  for (uint32_t i = 0; i < geometry_.queue_depth(); ++i) link_->post_receive();
}

std::shared_ptr<ChannelOp> Channel::post(bool is_send, const void* data, size_t bytes,
                                         uint64_t tag) {
  auto op = std::make_shared<ChannelOp>();
  op->is_send = is_send;
  op->data = static_cast<char*>(const_cast<void*>(data));
  op->bytes = bytes;
  op->tag = tag;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failed_ && !link_) {
    fail_locked(RINGD_MAKE_ERROR(kInternal, "rank " << rank_ << ": ibverbs pair to peer "
                                                    << description_ << " used before it connected"),
                false);
  }
  if (failed_) {
    op->done = true;
    op->error = failed_;
    return op;
  }
  if (is_send) {
    sends_.push_back(op);
    pump_sends_locked();
  } else {
    receives_.push_back(op);
    pump_receives_locked();
  }
  return op;
}

void Channel::wait(ChannelOp& op, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto bounded = std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365));
  if (!completed_.wait_for(lock, bounded, [&] { return op.done; })) {
    const Error error = RINGD_MAKE_ERROR(
        kTimeout, "rank " << rank_ << ": timed out after " << timeout.count() << " ms waiting to "
                          << (op.is_send ? "send " : "receive ") << describe_op(op)
                          << " — the peer is stuck, slower than RINGD_TIMEOUT, or running a "
                             "different collective; the pair is now closed");
    fail_locked(error, true);
    throw error;
  }
  if (op.error) throw *op.error;
}

void Channel::abort(const std::string& reason) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || closed_) return;
    fail_locked(RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": the pair to peer "
                                                    << description_ << " was aborted: " << reason),
                false);
    send_abort_notice_locked(reason);
  } catch (...) {
    // best effort
  }
}

void Channel::flush_abort(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait_for(lock, limit, [&] { return !abort_in_flight_ || closed_; });
}

void Channel::close(const Error& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_locked(error, false);
  closed_ = true;
  abort_in_flight_ = false;
  completed_.notify_all();
}

void Channel::fail_locked(const Error& error, bool tell_peer) {
  if (failed_) return;
  failed_ = error;
  for (auto* queue : {&sends_, &receives_}) {
    for (auto& op : *queue) {
      op->done = true;
      op->error = error;
    }
    queue->clear();
  }
  completed_.notify_all();
  if (tell_peer) send_abort_notice_locked(error.what());
}

void Channel::send_abort_notice_locked(const std::string& reason) {
  if (abort_sent_ || closed_ || !link_) return;
  abort_sent_ = true;
  const uint32_t slot = geometry_.abort_slot();
  const size_t reason_bytes = std::min(reason.size(), geometry_.payload_bytes());
  uint8_t* stage = memory_.get() + geometry_.stage_offset(slot);
  const SlotHeader header{kSlotMagic | kSlotVersion,
                          kSlotFlagAbort,
                          0,
                          reason_bytes,
                          0,
                          static_cast<uint32_t>(reason_bytes),
                          0};
  std::memcpy(stage, &header, sizeof(header));
  std::memcpy(stage + kSlotHeaderBytes, reason.data(), reason_bytes);
  const auto bytes = static_cast<uint32_t>(kSlotHeaderBytes + reason_bytes);
  try {
    link_->post_write(static_cast<uint32_t>(ImmKind::kAbort), geometry_.stage_offset(slot),
                      geometry_.receive_offset(slot), bytes, make_imm(ImmKind::kAbort, bytes));
    abort_in_flight_ = true;
  } catch (const Error&) {
    // The link is already broken; the peer will see its own error.
  }
}

}  // namespace ringd::ibverbs
