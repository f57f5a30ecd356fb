#include <cstdlib>
#include <cstring>

#include "ringd/error.h"
#include "ringd/transport.h"

namespace ringd {

Context::Context(int rank, int size, std::string transport_name,
                 std::vector<std::unique_ptr<Pair>> pairs, std::shared_ptr<void> keepalive,
                 std::chrono::milliseconds timeout)
    : rank_(rank),
      size_(size),
      transport_name_(std::move(transport_name)),
      pairs_(std::move(pairs)),
      keepalive_(std::move(keepalive)),
      timeout_(timeout) {
  RINGD_CHECK_ARG(size >= 1 && rank >= 0 && rank < size,
                  "invalid rank " << rank << " for world size " << size);
  RINGD_CHECK_ARG(static_cast<int>(pairs_.size()) == size, "context for rank "
                                                               << rank << " has " << pairs_.size()
                                                               << " pairs, expected " << size);
}

Context::~Context() {
  pairs_.clear();  // pairs before the device that serves them
  keepalive_.reset();
}

Pair& Context::pair(int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_ || !pairs_[peer]) {
    RINGD_THROW(kInternal, "rank " << rank_ << " has no pair to rank " << peer << " (world size "
                                   << size_ << ")");
  }
  return *pairs_[peer];
}

void Context::abort(const std::string& reason) {
  if (!abort_reason_.empty()) return;
  abort_reason_ = reason;
  for (auto& pair : pairs_) {
    if (pair) pair->abort(reason);
  }
}

void Context::check_usable() const {
  if (!abort_reason_.empty()) {
    RINGD_THROW(kPeerLost, "rank " << rank_ << ": this context was aborted by an earlier failure ("
                                   << abort_reason_ << "); create a new one");
  }
}

void* Context::GrowingBuffer::reserve(size_t wanted, int rank, const char* what) {
  if (wanted > bytes || !memory) {
    const size_t rounded = ((wanted + 63) / 64) * 64 + 64;
    void* fresh = std::aligned_alloc(64, rounded);
    if (!fresh) {
      RINGD_THROW(kIo, "rank " << rank << ": cannot allocate " << rounded << " bytes of " << what
                               << " memory");
    }
    memory = std::unique_ptr<unsigned char, void (*)(void*)>(static_cast<unsigned char*>(fresh),
                                                             std::free);
    bytes = rounded;
  }
  return memory.get();
}

void* Context::scratch(size_t bytes) { return scratch_.reserve(bytes, rank_, "scratch"); }

void* Context::staging(size_t bytes) { return staging_.reserve(bytes, rank_, "staging"); }

}  // namespace ringd
