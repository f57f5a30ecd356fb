// A stand-in for an RDMA fabric, so the ibverbs transport's protocol (channel.h) runs without
// hardware: one thread per fabric delivers posted writes in order, copying bytes from the
// sender's pair memory into the receiver's and then completing both sides, like an RC queue pair.
// It also checks what hardware would enforce: a write needs a posted receive on the other side
// (RNR), and a side never has more work requests outstanding than the queue depth. Violations
// are recorded for the test to assert on. Faults can be injected: a dead rank (its peers' writes
// fail as "retry exceeded") and a corrupted write.
#pragma once

#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringd/error.h"
#include "ringd/transport.h"
#include "transport/ibverbs/channel.h"
#include "transport/ibverbs/pair.h"

namespace ringd::testing {

class FakeFabric : public std::enable_shared_from_this<FakeFabric> {
 public:
  FakeFabric() : thread_([this] { run(); }) {}
  ~FakeFabric() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  // Joins `a` (rank i's channel to j) and `b` (rank j's channel to i) and attaches their links.
  void connect(const std::shared_ptr<ibverbs::Channel>& a,
               const std::shared_ptr<ibverbs::Channel>& b, int rank_a, int rank_b) {
    auto end_a = std::make_shared<Endpoint>();
    auto end_b = std::make_shared<Endpoint>();
    end_a->channel = a;
    end_a->rank = rank_a;
    end_b->channel = b;
    end_b->rank = rank_b;
    end_a->peer = end_b.get();
    end_b->peer = end_a.get();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      endpoints_.push_back(end_a);
      endpoints_.push_back(end_b);
    }
    a->attach(std::make_shared<Link>(*this, end_a.get()));
    b->attach(std::make_shared<Link>(*this, end_b.get()));
  }

  // From now on writes to or from `rank` fail at the sender, as if its process died.
  void kill_rank(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    dead_ranks_.push_back(rank);
  }
  // The next data write from `rank` arrives with its header's magic flipped.
  void corrupt_next_write_from(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    corrupt_from_ = rank;
  }
  // Blocks until no write is queued or being delivered.
  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !delivering_; });
  }
  // Data writes delivered from `from` to `to` so far.
  size_t data_writes(int from, int to) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (auto& end : endpoints_) {
      if (end->rank == from && end->peer->rank == to) n = end->data_writes;
    }
    return n;
  }
  std::string violations() {
    std::lock_guard<std::mutex> lock(mutex_);
    return violations_;
  }

 private:
  struct Endpoint {
    std::shared_ptr<ibverbs::Channel> channel;
    Endpoint* peer = nullptr;
    int rank = 0;
    int posted_receives = 0;
    uint32_t outstanding_sends = 0;
    size_t data_writes = 0;
  };
  struct Write {
    Endpoint* from;
    uint32_t cookie;
    size_t local;
    size_t remote;
    uint32_t bytes;
    uint32_t imm;
  };

  class Link : public ibverbs::Link {
   public:
    Link(FakeFabric& fabric, Endpoint* self) : fabric_(fabric), self_(self) {}
    void post_write(uint32_t cookie, size_t local, size_t remote, uint32_t bytes,
                    uint32_t imm) override {
      fabric_.post_write(Write{self_, cookie, local, remote, bytes, imm});
    }
    void post_receive() override {
      std::lock_guard<std::mutex> lock(fabric_.mutex_);
      ++self_->posted_receives;
    }

   private:
    FakeFabric& fabric_;
    Endpoint* self_;
  };

  void post_write(const Write& write) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint32_t depth = write.from->channel->geometry().queue_depth();
      if (++write.from->outstanding_sends > depth) {
        violations_ += "rank " + std::to_string(write.from->rank) + " exceeded its send queue (" +
                       std::to_string(depth) + " work requests); ";
      }
      queue_.push_back(write);
    }
    changed_.notify_all();
  }

  bool dead(int rank) const {
    for (int r : dead_ranks_) {
      if (r == rank) return true;
    }
    return false;
  }

  // Like a NIC ahead of a busy CPU: every queued write is first put on the wire (bytes copied,
  // a receive work request consumed), and only then are the completions handed to the channels,
  // which repost their receives. So receive queues really drain as far as the protocol allows.
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      std::deque<Write> batch;
      batch.swap(queue_);
      delivering_ = true;
      std::vector<Completion> completions;
      for (const Write& write : batch) completions.push_back(put_on_wire(write));
      lock.unlock();
      for (const Completion& completion : completions) complete(completion);
      lock.lock();
      delivering_ = false;
      if (queue_.empty()) idle_.notify_all();
    }
  }

  struct Completion {
    Write write;
    bool failed = false;
  };

  // With the lock held: what the hardware does before any completion is seen.
  Completion put_on_wire(const Write& write) {
    Endpoint* from = write.from;
    Endpoint* to = from->peer;
    --from->outstanding_sends;
    if (dead(from->rank) || dead(to->rank)) return Completion{write, true};
    if (to->posted_receives == 0) {
      violations_ += "a write from rank " + std::to_string(from->rank) + " to rank " +
                     std::to_string(to->rank) + " found no posted receive (RNR); ";
    } else {
      --to->posted_receives;
    }
    const auto kind = ibverbs::imm_kind(write.imm);
    if (kind == ibverbs::ImmKind::kData) ++from->data_writes;
    if (write.bytes > 0) {
      std::memcpy(to->channel->memory() + write.remote, from->channel->memory() + write.local,
                  write.bytes);
    }
    if (kind == ibverbs::ImmKind::kData && corrupt_from_ == from->rank) {
      corrupt_from_ = -1;
      to->channel->memory()[write.remote] ^= 0xFF;
    }
    return Completion{write, false};
  }

  // Without the lock: the channels post back into the fabric.
  void complete(const Completion& completion) {
    Endpoint* from = completion.write.from;
    Endpoint* to = from->peer;
    if (completion.failed) {
      from->channel->on_failure(Error(
          ErrorCode::kPeerLost, "rank " + std::to_string(from->rank) +
                                    ": RDMA write to peer rank " + std::to_string(to->rank) +
                                    " failed: transport retry counter exceeded (fake fabric)"));
      return;
    }
    to->channel->on_receive(completion.write.imm, completion.write.bytes);
    from->channel->on_send_done(completion.write.cookie);
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable idle_;
  std::deque<Write> queue_;
  std::vector<std::shared_ptr<Endpoint>> endpoints_;
  std::vector<int> dead_ranks_;
  int corrupt_from_ = -1;
  bool delivering_ = false;
  bool stopping_ = false;
  std::string violations_;
  std::thread thread_;
};

// `size` contexts whose pairs are ibverbs channels joined by one FakeFabric (the contexts keep it
// alive). Small slots by default so that messages span several slots and credits cycle often.
inline std::vector<std::unique_ptr<Context>> fake_ibverbs_contexts(
    int size, std::shared_ptr<FakeFabric> fabric, ibverbs::SlotGeometry geometry = {4, 256},
    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::vector<std::vector<std::shared_ptr<ibverbs::Channel>>> channels(
      size, std::vector<std::shared_ptr<ibverbs::Channel>>(size));
  for (int a = 0; a < size; ++a) {
    for (int b = 0; b < size; ++b) {
      if (a == b) continue;
      channels[a][b] = std::make_shared<ibverbs::Channel>(a, b, geometry);
      channels[a][b]->set_description("rank " + std::to_string(b) + " (fake fabric)");
    }
  }
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) fabric->connect(channels[a][b], channels[b][a], a, b);
  }
  std::vector<std::unique_ptr<Context>> contexts;
  for (int rank = 0; rank < size; ++rank) {
    std::vector<std::unique_ptr<Pair>> pairs(size);
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) pairs[peer] = std::make_unique<ibverbs::IbPair>(channels[rank][peer]);
    }
    contexts.push_back(
        std::make_unique<Context>(rank, size, "ibverbs", std::move(pairs), fabric, timeout));
  }
  return contexts;
}

}  // namespace ringd::testing
