// Channel's data path: staging chunks into writes as credits allow, matching arrived chunks
// against posted receives, returning credits, and the completions that drive all of it (see
// channel.h and flow_control.h).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "transport/ibverbs/channel.h"

namespace ringd::ibverbs {
namespace {

std::string hex(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

}  // namespace

void Channel::pump_sends_locked() {
  while (!failed_ && !sends_.empty() && send_credits_.can_write()) {
    ChannelOp& op = *sends_.front();
    const uint32_t slot = send_credits_.begin_write();
    const size_t chunk = std::min(geometry_.payload_bytes(), op.bytes - op.progress);
    uint8_t* stage = memory_.get() + geometry_.stage_offset(slot);
    const SlotHeader header{kSlotMagic | kSlotVersion,    0, op.tag, op.bytes, op.progress,
                            static_cast<uint32_t>(chunk), 0};
    std::memcpy(stage, &header, sizeof(header));
    if (chunk > 0) std::memcpy(stage + kSlotHeaderBytes, op.data + op.progress, chunk);
    try {
      link_->post_write(static_cast<uint32_t>(ImmKind::kData), geometry_.stage_offset(slot),
                        geometry_.receive_offset(slot),
                        static_cast<uint32_t>(kSlotHeaderBytes + chunk),
                        make_imm(ImmKind::kData, slot));
    } catch (const Error& error) {
      fail_locked(error, false);
      return;
    }
    op.progress += chunk;
    op.started = true;
    if (op.progress == op.bytes) {
      op.done = true;
      sends_.pop_front();
      completed_.notify_all();
    }
  }
}

void Channel::pump_receives_locked() {
  while (!failed_ && !receives_.empty() && receive_slots_.has_arrived()) {
    ChannelOp& op = *receives_.front();
    if (!consume_chunk_locked(op)) return;
    if (op.progress == op.bytes) {
      op.done = true;
      receives_.pop_front();
      completed_.notify_all();
    }
  }
  return_credits_locked();
}

bool Channel::consume_chunk_locked(ChannelOp& op) {
  const uint32_t slot = receive_slots_.next_slot();
  const uint8_t* data = memory_.get() + geometry_.receive_offset(slot);
  SlotHeader header;
  std::memcpy(&header, data, sizeof(header));
  if (header.magic_version != (kSlotMagic | kSlotVersion) || header.flags != 0 ||
      header.chunk_bytes > geometry_.payload_bytes() ||
      arrived_bytes_[slot] != kSlotHeaderBytes + header.chunk_bytes ||
      header.offset > header.message_bytes ||
      header.chunk_bytes !=
          std::min(geometry_.payload_bytes(), header.message_bytes - header.offset)) {
    protocol_fault_locked("slot " + std::to_string(slot) + " holds a corrupt chunk (header " +
                          hex(header.magic_version) + ", " + std::to_string(arrived_bytes_[slot]) +
                          " bytes written)");
    return false;
  }
  if (!op.started) {
    if (header.offset != 0) {
      protocol_fault_locked("a chunk at offset " + std::to_string(header.offset) +
                            " arrived where a message should start");
      return false;
    }
    if (header.tag != op.tag || header.message_bytes != op.bytes) {
      fail_locked(
          RINGD_MAKE_ERROR(kMismatch,
                           "rank " << rank_ << ": message mismatch with peer " << description_
                                   << ": the next posted receive expects " << describe_tag(op.tag)
                                   << ", " << op.bytes << " bytes, but the peer sent "
                                   << describe_tag(header.tag) << ", " << header.message_bytes
                                   << " bytes — " << tag_mismatch_cause(op.tag, header.tag)),
          true);
      return false;
    }
    op.started = true;
  } else if (header.tag != op.tag || header.message_bytes != op.bytes ||
             header.offset != op.progress) {
    protocol_fault_locked("a chunk of " + describe_tag(header.tag) + " at offset " +
                          std::to_string(header.offset) + " arrived in the middle of " +
                          describe_op(op) + " at offset " + std::to_string(op.progress));
    return false;
  }
  if (header.chunk_bytes > 0) {
    std::memcpy(op.data + op.progress, data + kSlotHeaderBytes, header.chunk_bytes);
  }
  op.progress += header.chunk_bytes;
  receive_slots_.consume();
  return true;
}

void Channel::return_credits_locked() {
  if (failed_) return;
  const uint32_t credits = receive_slots_.credits_due();
  if (credits == 0) return;
  try {
    link_->post_write(static_cast<uint32_t>(ImmKind::kCredit), 0, 0, 0,
                      make_imm(ImmKind::kCredit, credits));
  } catch (const Error& error) {
    fail_locked(error, false);
    return;
  }
  receive_slots_.credits_sent(credits);
}

void Channel::protocol_fault_locked(const std::string& what) {
  fail_locked(RINGD_MAKE_ERROR(kProtocol, "rank " << rank_ << ": corrupt ibverbs stream from peer "
                                                  << description_ << ": " << what
                                                  << "; is every rank running the same ringd?"),
              true);
}

void Channel::on_receive(uint32_t imm, uint32_t byte_len) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_ || failed_) return;
  try {
    link_->post_receive();  // replace the work request this write consumed
  } catch (const Error& error) {
    fail_locked(error, false);
    return;
  }
  const uint32_t value = imm_value(imm);
  switch (imm_kind(imm)) {
    case ImmKind::kData: receive_data_locked(value, byte_len); return;
    case ImmKind::kCredit:
      if (!send_credits_.on_credit(value)) {
        protocol_fault_locked("the peer returned " + std::to_string(value) +
                              " credits for slots that were never written");
        return;
      }
      pump_sends_locked();
      return;
    case ImmKind::kAbort: receive_abort_locked(byte_len); return;
  }
  protocol_fault_locked("unknown immediate " + hex(imm));
}

void Channel::receive_data_locked(uint32_t slot, uint32_t byte_len) {
  const uint64_t expected = receive_slots_.arrived() % geometry_.slots;
  if (!receive_slots_.on_arrival(slot)) {
    protocol_fault_locked("the peer wrote slot " + std::to_string(slot) + " where slot " +
                          std::to_string(expected) +
                          " was next, or wrote more slots than it had credits for");
    return;
  }
  arrived_bytes_[slot] = byte_len;
  pump_receives_locked();
}

void Channel::receive_abort_locked(uint32_t byte_len) {
  const uint8_t* data = memory_.get() + geometry_.receive_offset(geometry_.abort_slot());
  SlotHeader header;
  std::memcpy(&header, data, sizeof(header));
  std::string reason = "(an unreadable abort notice)";
  if (header.magic_version == (kSlotMagic | kSlotVersion) && (header.flags & kSlotFlagAbort) &&
      header.chunk_bytes <= geometry_.payload_bytes() &&
      byte_len == kSlotHeaderBytes + header.chunk_bytes) {
    reason.assign(reinterpret_cast<const char*>(data + kSlotHeaderBytes), header.chunk_bytes);
  }
  fail_locked(RINGD_MAKE_ERROR(kPeerLost, "rank " << rank_ << ": peer " << description_
                                                  << " aborted: " << reason),
              false);
}

void Channel::on_send_done(uint32_t cookie) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cookie == static_cast<uint32_t>(ImmKind::kAbort)) {
    abort_in_flight_ = false;
    completed_.notify_all();
    return;
  }
  if (closed_ || failed_) return;
  if (cookie == static_cast<uint32_t>(ImmKind::kData)) {
    if (!send_credits_.on_write_completed()) {
      fail_locked(
          RINGD_MAKE_ERROR(kInternal, "rank " << rank_ << ": ibverbs pair to peer " << description_
                                              << " completed a write it never posted"),
          true);
      return;
    }
    pump_sends_locked();
  } else if (cookie == static_cast<uint32_t>(ImmKind::kCredit)) {
    if (!receive_slots_.on_credit_write_completed()) {
      fail_locked(
          RINGD_MAKE_ERROR(kInternal, "rank " << rank_ << ": ibverbs pair to peer " << description_
                                              << " completed a credit it never sent"),
          true);
      return;
    }
    return_credits_locked();
  }
}

void Channel::on_failure(const Error& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  abort_in_flight_ = false;  // a failed queue pair flushes it; it will not arrive
  fail_locked(error, false);
  completed_.notify_all();
}

}  // namespace ringd::ibverbs
