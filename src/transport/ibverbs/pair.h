// The ringd::Pair handed to Context for one peer of the ibverbs transport: a thin handle on the
// Channel that does the work (channel.h). Destroying it gives a pending abort notice a moment to
// reach the peer, then closes the channel.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ringd/transport.h"
#include "transport/ibverbs/channel.h"

namespace ringd::ibverbs {

// How long destroying a pair waits for its abort notice to be written.
constexpr std::chrono::milliseconds kAbortFlushLimit{2000};

class IbPair : public Pair {
 public:
  explicit IbPair(std::shared_ptr<Channel> channel) : channel_(std::move(channel)) {}
  ~IbPair() override;
  int peer_rank() const override { return channel_->peer(); }
  std::string peer_description() const override { return channel_->description(); }
  RequestPtr isend(const void* data, size_t bytes, uint64_t tag) override;
  RequestPtr irecv(void* data, size_t bytes, uint64_t tag) override;
  void abort(const std::string& reason) override { channel_->abort(reason); }

 private:
  std::shared_ptr<Channel> channel_;
};

}  // namespace ringd::ibverbs
