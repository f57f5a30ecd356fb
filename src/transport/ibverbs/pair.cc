#include "transport/ibverbs/pair.h"

namespace ringd::ibverbs {
namespace {

class IbRequest : public Request {
 public:
  IbRequest(std::shared_ptr<Channel> channel, std::shared_ptr<ChannelOp> op)
      : channel_(std::move(channel)), op_(std::move(op)) {}
  void wait(std::chrono::milliseconds timeout) override { channel_->wait(*op_, timeout); }

 private:
  std::shared_ptr<Channel> channel_;
  std::shared_ptr<ChannelOp> op_;
};

}  // namespace

IbPair::~IbPair() {
  channel_->flush_abort(kAbortFlushLimit);
  channel_->close(RINGD_MAKE_ERROR(kInvalidArgument, "the ibverbs pair to peer "
                                                         << channel_->description()
                                                         << " was closed (its context was "
                                                            "destroyed)"));
}

RequestPtr IbPair::isend(const void* data, size_t bytes, uint64_t tag) {
  return std::make_unique<IbRequest>(channel_, channel_->post(true, data, bytes, tag));
}

RequestPtr IbPair::irecv(void* data, size_t bytes, uint64_t tag) {
  return std::make_unique<IbRequest>(channel_, channel_->post(false, data, bytes, tag));
}

}  // namespace ringd::ibverbs
