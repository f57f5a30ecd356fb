// Host staging with two slots (LocalGroup::stage() for groups whose buffers are not host memory):
// the schedule of copies between device buffers and two host slots, apart from how a copy is
// made. A PieceCopier makes the copies (cuda/cuda_piece_copier.h: cudaMemcpyAsync on a copy
// stream per device, one event per slot and direction, pinned slots); the tests drive this class
// with a fake copier on host memory (tests/allreduce/double_buffered_staging_test.cc).
//
// Piece i lives in slot i % 2. With access kReadWrite, while the caller works on piece i (the
// step across nodes on the network), the copier is already fetching piece i+1 into the other slot
// and writing piece i-1 back from it:
//
//   caller:      acquire 0 | step 0 | release 0 | acquire 1 | step 1 | release 1 | acquire 2 ...
//   slot 0:  fetch 0 ..ready|  held by the caller  |write 0, then fetch 2 ..........| ready
//   slot 1:  fetch 1 .....................ready    |  held by the caller  | write 1, fetch 3 ...
//
// - stage (the constructor) queues the fetches of pieces 0 and 1;
// - acquire(i) waits (host) for the fetch of piece i only, which was queued one step earlier;
// - release(i) queues the write-back of piece i and then the fetch of piece i+2 into the same
//   slot; the copier orders the fetch after the write-back on the device side (the host does not
//   wait), so both overlap the caller's step on piece i+1;
// - finish() waits for every write-back.
// kRead pieces are never written back; kWrite pieces are never fetched, and acquire(i) waits
// instead for the write-back of piece i-2, whose slot the caller is about to overwrite. No copy
// ever spans more than one piece, and nothing is allocated per piece: the slots belong to the
// copier and are reused by every staging (reserve_slots() grows them, only when a piece larger
// than any before arrives).
#pragma once

#include <cstddef>
#include <vector>

#include "ringd/local_group.h"

namespace ringd::device {

enum class CopyDirection { kToHost, kToDevice };

// Asynchronous copies between pieces of device buffers and two host slots. Copies queued on one
// slot complete in the order they were queued (a fetch into a slot starts only after the slot's
// previous write-back has finished); the host learns of completion only through wait().
class PieceCopier {
 public:
  virtual ~PieceCopier() = default;
  // Makes both slots at least `bytes` long (never shrinks). No copy may be pending.
  virtual void reserve_slots(size_t bytes) = 0;
  virtual void* slot(int slot) = 0;
  // Queues the copy of `piece` (elements of `dtype` in buffers[piece.device]) from the device
  // to slot `slot` (kToHost) or from the slot to the device (kToDevice).
  virtual void start(CopyDirection direction, int slot, DeviceBuffers buffers,
                     const HostPiece& piece, DataType dtype) = 0;
  // Blocks until the last copy queued in `direction` on `slot` has finished; returns at once when
  // none is pending. Throws ringd::Error when that copy failed.
  virtual void wait(CopyDirection direction, int slot) = 0;

  // One staging at a time: a DoubleBufferedStaging claims its copier for its whole life.
  bool claimed() const { return claimed_; }

 private:
  friend class DoubleBufferedStaging;
  bool claimed_ = false;
};

class DoubleBufferedStaging : public HostStaging {
 public:
  // `copier` must outlive this staging; `buffers` must stay valid until finish() or destruction.
  // Throws kInvalidArgument for a piece on a device outside `buffers`, and kInternal while another
  // staging holds the copier (the slots are shared: finish or destroy it first).
  DoubleBufferedStaging(PieceCopier& copier, DeviceBuffers buffers, std::vector<HostPiece> pieces,
                        DataType dtype, HostAccess access);
  ~DoubleBufferedStaging() override;
  DoubleBufferedStaging(const DoubleBufferedStaging&) = delete;
  DoubleBufferedStaging& operator=(const DoubleBufferedStaging&) = delete;

  // Pieces are acquired and released in order, at most two held at a time (HostStaging); calls
  // out of that order throw kInvalidArgument.
  void* acquire(size_t piece) override;
  void release(size_t piece) override;
  void finish() override;

 private:
  // Queues the fetches whose slots are free, in piece order.
  void fetch_ahead();
  void wait_all();

  PieceCopier& copier_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<HostPiece> pieces_;
  DataType dtype_;
  bool fetches_;      // access != kWrite
  bool writes_back_;  // access != kRead
  size_t next_acquire_ = 0;
  size_t released_ = 0;    // pieces 0..released_-1 are released
  size_t next_fetch_ = 0;  // pieces 0..next_fetch_-1 have their fetch queued
  bool finished_ = false;
};

}  // namespace ringd::device
