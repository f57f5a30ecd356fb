#include "device/double_buffered_staging.h"

#include <algorithm>

#include "ringd/error.h"

namespace ringd::device {

DoubleBufferedStaging::DoubleBufferedStaging(PieceCopier& copier, DeviceBuffers buffers,
                                             std::vector<HostPiece> pieces, DataType dtype,
                                             HostAccess access)
    : copier_(copier),
      buffers_(buffers.begin(), buffers.end()),
      pieces_(std::move(pieces)),
      dtype_(dtype),
      fetches_(access != HostAccess::kWrite),
      writes_back_(access != HostAccess::kRead) {
  size_t largest = 0;
  for (const HostPiece& piece : pieces_) {
    RINGD_CHECK_ARG(piece.device >= 0 && piece.device < static_cast<int>(buffers_.size()),
                    "host staging: a piece on device " << piece.device << " of a group of "
                                                       << buffers_.size() << " devices");
    largest = std::max(largest, piece.count * dtype_size(dtype_));
  }
  if (copier_.claimed_) {
    RINGD_THROW(kInternal,
                "host staging: the staging slots are still in use by an unfinished "
                "staging; finish or destroy it before staging again");
  }
  copier_.reserve_slots(largest);
  copier_.claimed_ = true;
  try {
    fetch_ahead();
  } catch (...) {  // no destructor runs for a constructor that throws
    try {
      wait_all();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
    }
    copier_.claimed_ = false;
    throw;
  }
}

DoubleBufferedStaging::~DoubleBufferedStaging() {
  if (!finished_) {
    try {
      wait_all();    // the slots may not be reused while a copy still reads or writes them
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor reports nothing (HostStaging)
    }
  }
  copier_.claimed_ = false;
}

void DoubleBufferedStaging::fetch_ahead() {
  if (!fetches_) return;
  // Piece j goes to slot j % 2, which is free once piece j - 2 has been released.
  while (next_fetch_ < pieces_.size() && next_fetch_ < released_ + 2) {
    copier_.start(CopyDirection::kToHost, static_cast<int>(next_fetch_ % 2), buffers_,
                  pieces_[next_fetch_], dtype_);
    ++next_fetch_;
  }
}

void* DoubleBufferedStaging::acquire(size_t piece) {
  RINGD_CHECK_ARG(
      !finished_ && piece == next_acquire_ && piece < pieces_.size() && piece < released_ + 2,
      "host staging: acquire(" << piece << ") out of order (" << pieces_.size() << " pieces, next "
                               << next_acquire_ << ", " << released_ << " released"
                               << (finished_ ? ", finished" : "") << ")");
  const int slot = static_cast<int>(piece % 2);
  if (fetches_) {
    fetch_ahead();
    copier_.wait(CopyDirection::kToHost, slot);
  } else {
    copier_.wait(CopyDirection::kToDevice, slot);  // piece - 2's write-back left the slot
  }
  ++next_acquire_;
  return copier_.slot(slot);
}

void DoubleBufferedStaging::release(size_t piece) {
  RINGD_CHECK_ARG(!finished_ && piece == released_ && piece < next_acquire_,
                  "host staging: release(" << piece << ") out of order (" << next_acquire_
                                           << " acquired, " << released_ << " released)");
  if (writes_back_) {
    copier_.start(CopyDirection::kToDevice, static_cast<int>(piece % 2), buffers_, pieces_[piece],
                  dtype_);
  }
  ++released_;
  fetch_ahead();
}

void DoubleBufferedStaging::finish() {
  RINGD_CHECK_ARG(!finished_ && released_ == next_acquire_,
                  "host staging: finish() with " << next_acquire_ - released_
                                                 << " pieces still held"
                                                 << (finished_ ? " (finished already)" : ""));
  wait_all();
  finished_ = true;
}

void DoubleBufferedStaging::wait_all() {
  for (int slot = 0; slot < 2; ++slot) {
    copier_.wait(CopyDirection::kToHost, slot);
    copier_.wait(CopyDirection::kToDevice, slot);
  }
}

}  // namespace ringd::device
