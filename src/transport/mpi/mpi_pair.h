// One Pair of the mpi transport: MPI_Isend/MPI_Irecv to one peer on the context's private
// communicator, always with the same MPI tag. MPI's non-overtaking rule (messages between two
// ranks on one communicator and tag match in the order they were posted) gives the FIFO order the
// transport contract asks for, so no per-message MPI tag is needed.
//
// Wire format of one ringd message (both sides pick the same framing from their own byte count, so
// a size disagreement always surfaces as a wrong count, a truncation or a wrong header):
//
//   bytes <= kInlineBytes:  one MPI message   [ header | payload ]        (copied through a buffer)
//   bytes >  kInlineBytes:  [ header ] then the payload straight from/to the caller's buffer, in
//                           chunks of at most kChunkBytes (MPI counts are ints)
//
// The 16-byte header carries the ringd tag and byte count, checked on receipt: a receive whose tag
// or size differs from what arrived fails with kMismatch instead of returning wrong data. A header
// with kAbortTag is a peer's abort notice instead (MpiPair::abort).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringd/error.h"
#include "ringd/transport.h"

namespace ringd::mpi {

inline constexpr size_t kInlineBytes = 16 << 10;
inline constexpr size_t kChunkBytes = size_t{1} << 30;
inline constexpr int kMpiTag = 7411;  // any fixed tag: ordering comes from the non-overtaking rule
// Pair::abort sends a header with this tag followed by the reason (at most kMaxAbortReasonBytes);
// the peer's receive fails with kPeerLost carrying that reason.
inline constexpr uint64_t kAbortTag = ~uint64_t{0};
inline constexpr size_t kMaxAbortReasonBytes = 1024;

// Owns the duplicated communicator; freed when the context and every request are gone.
class Communicator {
 public:
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_;
};

// What a pair's requests share: who talks to whom, and the pair's first failure. Once set,
// `failure` is rethrown by every later request (the message order can no longer be trusted).
struct PairState {
  std::shared_ptr<Communicator> comm;
  int rank = 0;
  int peer = 0;
  std::string peer_host;
  std::chrono::milliseconds default_timeout{0};
  std::optional<Error> failure;
  // Buffers of requests abandoned mid-flight: MPI may still read or write them, so they live as
  // long as the pair.
  std::vector<std::vector<uint8_t>> graveyard;

  void fail(const Error& error) {
    if (!failure) failure = error;
  }
};

class MpiPair : public Pair {
 public:
  explicit MpiPair(std::shared_ptr<PairState> state) : state_(std::move(state)) {}
  int peer_rank() const override { return state_->peer; }
  std::string peer_description() const override;
  RequestPtr isend(const void* data, size_t bytes, uint64_t tag) override;
  RequestPtr irecv(void* data, size_t bytes, uint64_t tag) override;
  void abort(const std::string& reason) override;

 private:
  std::shared_ptr<PairState> state_;
};

}  // namespace ringd::mpi
