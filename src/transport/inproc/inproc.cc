// inproc transport: ranks are threads of one process. Each directed channel (src -> dst) holds the
// posted sends and posted receives that have not met yet. Whichever side arrives second copies the
// payload straight from the sender's buffer into the receiver's (one memcpy) and completes both.
#include "ringd/inproc.h"

#include <cstring>
#include <deque>
#include <sstream>

#include "common/tunables.h"
#include "ringd/error.h"
#include "transport/completion.h"
#include "transport/error_text.h"

namespace ringd {

namespace {

struct PendingOp {
  void* data;  // destination for receives; source (const) for sends
  size_t bytes;
  uint64_t tag;
  std::shared_ptr<Completion> completion;
};

struct Channel {
  std::mutex mutex;
  std::deque<PendingOp> sends;
  std::deque<PendingOp> recvs;
};

}  // namespace

struct InprocHub::State {
  explicit State(int n)
      : size(n), channels(static_cast<size_t>(n) * n), dead(n, false), abort_reasons(n) {}
  int size;
  std::vector<Channel> channels;  // index src * size + dst
  std::mutex dead_mutex;
  std::vector<bool> dead;
  std::vector<std::string> abort_reasons;  // why each dead rank gave up ("" = it just went away)

  Channel& channel(int src, int dst) { return channels[static_cast<size_t>(src) * size + dst]; }
  bool is_dead(int rank) {
    std::lock_guard<std::mutex> lock(dead_mutex);
    return dead[rank];
  }
  std::string abort_reason(int rank) {
    std::lock_guard<std::mutex> lock(dead_mutex);
    return abort_reasons[rank];
  }
};

// Marks `rank` dead (with the reason it gave, if it aborted), then fails everything queued
// between it and every other rank. Posts check `dead` under the channel lock, so none slips in.
void kill_rank_in(InprocHub::State& state, int rank, const std::string& reason);

namespace {

std::exception_ptr peer_lost(int rank, int peer, const std::string& reason) {
  try {
    if (reason.empty()) {
      RINGD_THROW(kPeerLost, "rank " << rank << ": peer rank " << peer
                                     << " (inproc) is gone; its thread stopped or was killed");
    }
    RINGD_THROW(kPeerLost,
                "rank " << rank << ": peer rank " << peer << " (inproc) aborted: " << reason);
  } catch (...) {
    return std::current_exception();
  }
}

// Copies send -> recv after checking that they belong together.
void match(int src, int dst, PendingOp& send, PendingOp& recv) {
  if (send.tag != recv.tag || send.bytes != recv.bytes) {
    std::exception_ptr error;
    try {
      RINGD_THROW(kMismatch, "rank " << dst << ": expected " << recv.bytes << " bytes ("
                                     << describe_tag(recv.tag) << ") from peer rank " << src
                                     << " but it sent " << send.bytes << " bytes ("
                                     << describe_tag(send.tag) << "); "
                                     << tag_mismatch_cause(recv.tag, send.tag));
    } catch (...) {
      error = std::current_exception();
    }
    recv.completion->fail(error);
    send.completion->fail(error);
    return;
  }
  if (send.bytes > 0) std::memcpy(recv.data, send.data, send.bytes);
  recv.completion->complete();
  send.completion->complete();
}

class InprocPair : public Pair {
 public:
  InprocPair(std::shared_ptr<InprocHub::State> state, int rank, int peer)
      : state_(std::move(state)), rank_(rank), peer_(peer) {}

  int peer_rank() const override { return peer_; }
  std::string peer_description() const override {
    return "rank " + std::to_string(peer_) + " (inproc)";
  }

  RequestPtr isend(const void* data, size_t bytes, uint64_t tag) override {
    return post(state_->channel(rank_, peer_), const_cast<void*>(data), bytes, tag, true);
  }
  RequestPtr irecv(void* data, size_t bytes, uint64_t tag) override {
    return post(state_->channel(peer_, rank_), data, bytes, tag, false);
  }
  void abort(const std::string& reason) override { kill_rank_in(*state_, rank_, reason); }

 private:
  RequestPtr post(Channel& channel, void* data, size_t bytes, uint64_t tag, bool is_send) {
    auto completion = std::make_shared<Completion>();
    PendingOp op{data, bytes, tag, completion};
    std::lock_guard<std::mutex> lock(channel.mutex);  // dead is checked under it: see kill_rank_in
    if (state_->is_dead(peer_) || state_->is_dead(rank_)) {
      const int gone = state_->is_dead(peer_) ? peer_ : rank_;
      completion->fail(peer_lost(rank_, gone, state_->abort_reason(gone)));
    } else {
      auto& others = is_send ? channel.recvs : channel.sends;
      auto& mine = is_send ? channel.sends : channel.recvs;
      if (!others.empty()) {
        PendingOp other = std::move(others.front());
        others.pop_front();
        if (is_send)
          match(rank_, peer_, op, other);
        else
          match(peer_, rank_, other, op);
      } else {
        mine.push_back(op);
      }
    }
    const int rank = rank_, peer = peer_;
    return std::make_unique<CompletionRequest>(completion, [=] {
      RINGD_THROW(kTimeout, "rank " << rank << ": timed out waiting to "
                                    << (is_send ? "send " : "receive ") << bytes << " bytes ("
                                    << describe_tag(tag) << ") " << (is_send ? "to" : "from")
                                    << " peer rank " << peer
                                    << " (inproc); is that rank stuck or in another collective?");
    });
  }

  std::shared_ptr<InprocHub::State> state_;
  int rank_;
  int peer_;
};

}  // namespace

void kill_rank_in(InprocHub::State& state, int rank, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(state.dead_mutex);
    if (state.dead[rank]) return;
    state.dead[rank] = true;
    state.abort_reasons[rank] = reason;
  }
  for (int other = 0; other < state.size; ++other) {
    if (other == rank) continue;
    for (auto [src, dst] : {std::pair{rank, other}, std::pair{other, rank}}) {
      Channel& channel = state.channel(src, dst);
      std::lock_guard<std::mutex> lock(channel.mutex);
      for (auto* queue : {&channel.sends, &channel.recvs}) {
        for (PendingOp& op : *queue) op.completion->fail(peer_lost(other, rank, reason));
        queue->clear();
      }
    }
  }
}

InprocHub::InprocHub(int size) : state_(std::make_shared<State>(size)) {
  RINGD_CHECK_ARG(size >= 1, "inproc hub needs at least one rank, got " << size);
}

InprocHub::~InprocHub() = default;

std::unique_ptr<Context> InprocHub::connect(int rank, std::chrono::milliseconds timeout) {
  RINGD_CHECK_ARG(rank >= 0 && rank < state_->size,
                  "inproc rank " << rank << " out of range for size " << state_->size);
  std::vector<std::unique_ptr<Pair>> pairs(state_->size);
  for (int peer = 0; peer < state_->size; ++peer) {
    if (peer != rank) pairs[peer] = std::make_unique<InprocPair>(state_, rank, peer);
  }
  if (timeout.count() == 0) timeout = tunables().timeout;
  // Like a process whose sockets close when it exits: when this rank's context goes away, peers
  // still waiting on it fail with kPeerLost instead of waiting for their timeout.
  struct RankLease {
    std::shared_ptr<State> state;
    int rank;
    ~RankLease() { kill_rank_in(*state, rank, ""); }
  };
  auto lease = std::shared_ptr<RankLease>(new RankLease{state_, rank});
  return std::make_unique<Context>(rank, state_->size, "inproc", std::move(pairs), lease, timeout);
}

void InprocHub::kill_rank(int rank) { kill_rank_in(*state_, rank, ""); }

}  // namespace ringd
