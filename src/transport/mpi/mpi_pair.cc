// C API only: keep <mpi.h> from pulling in the deprecated C++ bindings (libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include "transport/mpi/mpi_pair.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>

#include "transport/error_text.h"
#include "transport/mpi/mpi_errors.h"

namespace ringd::mpi {
namespace {

struct Header {
  uint64_t tag;
  uint64_t bytes;
};
static_assert(sizeof(Header) == 16);

// Polling schedule for Request::wait. MPI only progresses inside MPI calls, so a wait polls
// MPI_Test: for the first kYieldPhase with sched_yield() between polls (which hands the core to
// another rank when ranks outnumber cores, and keeps small-message latency near MPI's own), then
// with nanosleep from 1 us doubling up to 200 us, so a long wait costs almost no CPU.
constexpr std::chrono::microseconds kYieldPhase{100};
constexpr long kFirstSleepNs = 1000;
constexpr long kMaxSleepNs = 200000;

class MpiRequest : public Request {
 public:
  enum class Direction { kSend, kRecv };

  MpiRequest(std::shared_ptr<PairState> state, Direction direction, void* data, size_t bytes,
             uint64_t tag)
      : state_(std::move(state)), direction_(direction), data_(data), bytes_(bytes), tag_(tag) {
    if (!state_->failure) post();
  }

  ~MpiRequest() override {
    if (!complete_ && !state_->failure) {
      try {
        complete_ = advance();
      } catch (const Error& error) {
        state_->fail(error);
      }
    }
    if (!complete_ && !state_->failure) {
      state_->fail(Error(ErrorCode::kInternal,
                         where() + ": a request was abandoned before it completed, so the message "
                                   "order on this pair can no longer be trusted"));
    }
    abandon();
  }

  void wait(std::chrono::milliseconds timeout) override {
    if (complete_) return;
    if (state_->failure) {
      abandon();
      throw *state_->failure;
    }
    if (timeout.count() <= 0) timeout = state_->default_timeout;
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    long sleep_ns = kFirstSleepNs;
    try {
      while (true) {
        if (advance()) {
          complete_ = true;
          return;
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) {
          RINGD_THROW(kTimeout, "rank " << state_->rank << ": timed out after " << timeout.count()
                                        << " ms waiting to "
                                        << (direction_ == Direction::kRecv ? "receive " : "send ")
                                        << bytes_ << " bytes "
                                        << (direction_ == Direction::kRecv ? "from" : "to")
                                        << " peer rank " << state_->peer
                                        << " (mpi); that rank may be stuck, dead or running a "
                                           "different collective (raise --timeout/RINGD_TIMEOUT "
                                           "if it is only slow)");
        }
        if (now - start < kYieldPhase) {
          sched_yield();
        } else {
          const timespec pause{0, sleep_ns};
          nanosleep(&pause, nullptr);
          sleep_ns = std::min(sleep_ns * 2, kMaxSleepNs);
        }
      }
    } catch (const Error& error) {
      state_->fail(error);
      abandon();
      throw;
    }
  }

 private:
  std::string where() const {
    std::ostringstream os;
    os << "rank " << state_->rank << ": "
       << (direction_ == Direction::kRecv ? "receiving " : "sending ") << bytes_ << " bytes "
       << (direction_ == Direction::kRecv ? "from" : "to") << " peer rank " << state_->peer << " ("
       << describe_tag(tag_) << ", mpi)";
    return os.str();
  }

  // Receives leave room for an abort notice (see MpiPair::abort) in their first message, so a
  // peer's reason for giving up arrives intact instead of as a truncation error.
  void post() {
    const bool inline_payload = bytes_ <= kInlineBytes;
    const bool receiving = direction_ == Direction::kRecv;
    const Header header{tag_, bytes_};
    const size_t first_bytes = sizeof(Header) + (inline_payload ? bytes_ : 0);
    buffer_.resize(receiving ? std::max(first_bytes, sizeof(Header) + kMaxAbortReasonBytes)
                             : first_bytes);
    if (!receiving) {
      std::memcpy(buffer_.data(), &header, sizeof header);
      if (inline_payload && bytes_ > 0) std::memcpy(buffer_.data() + sizeof header, data_, bytes_);
    }
    start(buffer_.data(), buffer_.size(), first_bytes);
    if (inline_payload) return;
    for (size_t offset = 0; offset < bytes_; offset += kChunkBytes) {
      const size_t chunk = std::min(kChunkBytes, bytes_ - offset);
      start(static_cast<uint8_t*>(data_) + offset, chunk, chunk);
    }
  }

  // Posts one MPI message of up to `capacity` bytes that should carry exactly `expected`.
  void start(void* data, size_t capacity, size_t expected) {
    MPI_Request request = MPI_REQUEST_NULL;
    const int count = static_cast<int>(capacity);
    const MPI_Comm comm = state_->comm->get();
    const int code = direction_ == Direction::kSend
                         ? MPI_Isend(data, count, MPI_BYTE, state_->peer, kMpiTag, comm, &request)
                         : MPI_Irecv(data, count, MPI_BYTE, state_->peer, kMpiTag, comm, &request);
    try {
      check_mpi(code,
                where() + ": " + (direction_ == Direction::kSend ? "MPI_Isend" : "MPI_Irecv"));
    } catch (const Error& error) {
      state_->fail(error);  // reported by wait()
      return;
    }
    pending_.push_back(request);
    expected_.push_back(expected);
  }

  // Tests the pending MPI requests in posting order; true when all are done and verified.
  bool advance() {
    while (next_ < pending_.size()) {
      int flag = 0;
      MPI_Status status;
      std::memset(&status, 0, sizeof status);
      check_mpi(MPI_Test(&pending_[next_], &flag, &status), where());
      if (!flag) return false;
      if (direction_ == Direction::kRecv) verify(next_, status);
      ++next_;
    }
    return true;
  }

  void verify(size_t index, const MPI_Status& status) {
    int count = 0;
    check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), where() + ": MPI_Get_count");
    if (index == 0) {
      Header header{};
      if (count >= static_cast<int>(sizeof header))
        std::memcpy(&header, buffer_.data(), sizeof header);
      if (count >= static_cast<int>(sizeof header) && header.tag == kAbortTag) {
        const size_t length = std::min<size_t>(header.bytes, count - sizeof header);
        RINGD_THROW(
            kPeerLost,
            "rank " << state_->rank << ": peer rank " << state_->peer << " gave up: "
                    << std::string(reinterpret_cast<const char*>(buffer_.data() + sizeof header),
                                   length));
      }
      if (count < static_cast<int>(sizeof header) || header.tag != tag_ || header.bytes != bytes_) {
        std::ostringstream os;
        os << where() << ": the peer sent ";
        if (count < static_cast<int>(sizeof header)) {
          os << "a " << count << "-byte message without a ringd header";
        } else {
          os << header.bytes << " bytes with " << describe_tag(header.tag) << " for a receive of "
             << bytes_ << " bytes with " << describe_tag(tag_) << "; "
             << tag_mismatch_cause(tag_, header.tag);
        }
        os << " (every rank must call the same collectives with the same counts, types and ops in "
              "the same order)";
        RINGD_THROW(kMismatch, os.str());
      }
    }
    if (static_cast<size_t>(count) != expected_[index]) {
      RINGD_THROW(kMismatch, where() << ": MPI delivered " << count << " bytes where "
                                     << expected_[index]
                                     << " were expected; the ranks disagree "
                                        "on the message size");
    }
    if (index == 0 && bytes_ > 0 && bytes_ <= kInlineBytes) {
      std::memcpy(data_, buffer_.data() + sizeof(Header), bytes_);
    }
  }

  // Gives up on the MPI requests still pending: receives are cancelled, all are freed, and our
  // buffer outlives them in the pair's graveyard.
  void abandon() {
    bool any = false;
    for (size_t i = next_; i < pending_.size(); ++i) {
      if (pending_[i] == MPI_REQUEST_NULL) continue;
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized) break;
      if (direction_ == Direction::kRecv) MPI_Cancel(&pending_[i]);
      MPI_Request_free(&pending_[i]);
      any = true;
    }
    next_ = pending_.size();
    if (any && !buffer_.empty()) state_->graveyard.push_back(std::move(buffer_));
  }

  std::shared_ptr<PairState> state_;
  Direction direction_;
  void* data_;
  size_t bytes_;
  uint64_t tag_;
  std::vector<uint8_t> buffer_;       // header (+ inline payload)
  std::vector<MPI_Request> pending_;  // header/inline message first, then payload chunks
  std::vector<size_t> expected_;      // byte count of each pending message
  size_t next_ = 0;                   // first request not yet completed
  bool complete_ = false;             // every message done and verified
};

}  // namespace

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::string MpiPair::peer_description() const {
  std::ostringstream os;
  os << "rank " << state_->peer << " (" << state_->peer_host << ", mpi)";
  return os.str();
}

RequestPtr MpiPair::isend(const void* data, size_t bytes, uint64_t tag) {
  return std::make_unique<MpiRequest>(state_, MpiRequest::Direction::kSend, const_cast<void*>(data),
                                      bytes, tag);
}

void MpiPair::abort(const std::string& reason) {
  const std::string text = reason.substr(0, kMaxAbortReasonBytes);
  state_->fail(Error(ErrorCode::kPeerLost,
                     "rank " + std::to_string(state_->rank) + ": the pair to peer rank " +
                         std::to_string(state_->peer) + " was aborted: " + text));
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Fire and forget: the notice lands in the peer's next receive. Its buffer lives in the
  // graveyard because MPI may still be sending it when this pair is destroyed.
  std::vector<uint8_t> notice(sizeof(Header) + text.size());
  const Header header{kAbortTag, text.size()};
  std::memcpy(notice.data(), &header, sizeof header);
  std::memcpy(notice.data() + sizeof header, text.data(), text.size());
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Isend(notice.data(), static_cast<int>(notice.size()), MPI_BYTE, state_->peer, kMpiTag,
                state_->comm->get(), &request) == MPI_SUCCESS) {
    MPI_Request_free(&request);
  }
  state_->graveyard.push_back(std::move(notice));
}

RequestPtr MpiPair::irecv(void* data, size_t bytes, uint64_t tag) {
  return std::make_unique<MpiRequest>(state_, MpiRequest::Direction::kRecv, data, bytes, tag);
}

}  // namespace ringd::mpi
