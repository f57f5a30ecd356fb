// The ringd::Pair that Context holds for one peer of a transport whose per-peer work is done by a
// channel object (tcp's PairChannel, ibverbs' Channel): a thin handle. The channel provides
//
//   std::shared_ptr<Op> post(bool is_send, const void* data, size_t bytes, uint64_t tag);
//   void wait(Op& op, std::chrono::milliseconds timeout);
//   void abort(const std::string& reason);
//   void flush_abort(std::chrono::milliseconds limit);  // wait for a queued abort notice
//   void close(const Error& error);
//   int peer() const;  std::string description() const;
//   static constexpr const char* kTransport;            // "tcp", "ibverbs"
//
// Destroying the pair gives a queued abort notice up to kAbortFlushLimit to reach the peer (which
// then learns the root cause instead of seeing a bare end of stream), then closes the channel.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "ringd/error.h"
#include "ringd/transport.h"
#include "transport/error_text.h"

namespace ringd {

// How long destroying a pair waits for its abort notice to be written.
constexpr std::chrono::milliseconds kAbortFlushLimit{2000};

template <typename Channel>
class ChannelPair : public Pair {
 public:
  explicit ChannelPair(std::shared_ptr<Channel> channel) : channel_(std::move(channel)) {}
  ~ChannelPair() override {
    channel_->flush_abort(kAbortFlushLimit);
    channel_->close(
        RINGD_MAKE_ERROR(kInvalidArgument, "the " << Channel::kTransport << " pair to peer "
                                                  << channel_->description()
                                                  << " was closed (its context was destroyed)"));
  }
  ChannelPair(const ChannelPair&) = delete;
  ChannelPair& operator=(const ChannelPair&) = delete;

  int peer_rank() const override { return channel_->peer(); }
  std::string peer_description() const override { return channel_->description(); }
  RequestPtr isend(const void* data, size_t bytes, uint64_t tag) override {
    return std::make_unique<ChannelRequest>(channel_, channel_->post(true, data, bytes, tag));
  }
  RequestPtr irecv(void* data, size_t bytes, uint64_t tag) override {
    return std::make_unique<ChannelRequest>(channel_, channel_->post(false, data, bytes, tag));
  }
  void abort(const std::string& reason) override { channel_->abort(reason); }

 private:
  using Op = typename decltype(std::declval<Channel&>().post(true, nullptr, 0, 0))::element_type;

  class ChannelRequest : public Request {
   public:
    ChannelRequest(std::shared_ptr<Channel> channel, std::shared_ptr<Op> op)
        : channel_(std::move(channel)), op_(std::move(op)) {}
    void wait(std::chrono::milliseconds timeout) override { channel_->wait(*op_, timeout); }

   private:
    std::shared_ptr<Channel> channel_;
    std::shared_ptr<Op> op_;
  };

  std::shared_ptr<Channel> channel_;
};

}  // namespace ringd
