// The ibverbs wire format: what one RDMA WRITE WITH IMMEDIATE carries.
//
// Each pair owns, per direction, a ring of `slots` receive slots of `slot_bytes` each on the
// receiver, plus one extra slot (index `slots`) reserved for the abort notice:
//
//   receiver memory:  [ slot 0 | slot 1 | ... | slot N-1 | abort slot ]   (remote-writable)
//   sender memory:    [ stage 0 | stage 1 | ... | stage N-1 | abort stage ] (local only)
//
// A message of B bytes travels as ceil(B / payload) chunks (one chunk when B == 0); chunk k of the
// pair's write sequence s goes from stage (s mod N) to slot (s mod N). Every chunk starts with a
// SlotHeader so the receiver checks tag and size against its posted receive (kMismatch) and
// checks the stream itself (kProtocol) before copying the payload out.
//
// The 32-bit immediate says what a write is: kind in the top two bits, a value below.
//   kData   value = slot index (a cross-check of the ring order; RC delivers in order)
//   kCredit value = number of slots the receiver freed (a zero-byte write, no slot)
//   kAbort  value = bytes in the abort slot (header + reason)
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringd::ibverbs {

struct SlotHeader {
  uint32_t magic_version;
  uint32_t flags;
  uint64_t tag;
  uint64_t message_bytes;  // the whole message
  uint64_t offset;         // of this chunk within the message
  uint32_t chunk_bytes;    // payload bytes after the header in this slot
  uint32_t reserved;
};
static_assert(sizeof(SlotHeader) == 40, "SlotHeader is 40 bytes on the wire");

constexpr uint32_t kSlotMagic = 0x52490000u;  // "RI" + protocol version in the low 16 bits
constexpr uint32_t kSlotVersion = 1;
constexpr uint32_t kSlotFlagAbort = 1;  // the payload is the sender's reason for giving up
// Payload starts this far into a slot (cache-line aligned).
constexpr size_t kSlotHeaderBytes = 64;
constexpr size_t kMinSlotBytes = 256;
constexpr size_t kMaxSlots = 1024;

enum class ImmKind : uint32_t { kData = 0, kCredit = 1, kAbort = 2 };
constexpr uint32_t kImmValueMask = 0x3FFFFFFFu;

inline uint32_t make_imm(ImmKind kind, uint32_t value) {
  return (static_cast<uint32_t>(kind) << 30) | (value & kImmValueMask);
}
inline ImmKind imm_kind(uint32_t imm) { return static_cast<ImmKind>(imm >> 30); }
inline uint32_t imm_value(uint32_t imm) { return imm & kImmValueMask; }

// Where slot i lives in the per-pair memory (one allocation: receive ring, then staging ring).
struct SlotGeometry {
  uint32_t slots = 16;
  uint32_t slot_bytes = 64 << 10;

  size_t payload_bytes() const { return slot_bytes - kSlotHeaderBytes; }
  uint32_t abort_slot() const { return slots; }
  size_t ring_bytes() const { return size_t{slots + 1} * slot_bytes; }  // one direction
  size_t receive_offset(uint32_t slot) const { return size_t{slot} * slot_bytes; }
  size_t stage_offset(uint32_t slot) const { return ring_bytes() + size_t{slot} * slot_bytes; }
  size_t total_bytes() const { return 2 * ring_bytes(); }
  // Work requests one side can have outstanding: N data writes, at most N credit writes (see
  // flow_control.h), one abort; incoming ones are bounded the same way.
  uint32_t queue_depth() const { return 2 * slots + 2; }
  // Chunks a message of `bytes` needs (a zero-byte message still takes one slot).
  size_t chunks(size_t bytes) const {
    return bytes == 0 ? 1 : (bytes + payload_bytes() - 1) / payload_bytes();
  }
};

}  // namespace ringd::ibverbs
