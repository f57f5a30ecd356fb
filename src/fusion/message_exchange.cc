#include "fusion/message_exchange.h"

#include <cstdint>

#include "ringd/error.h"

namespace ringd::fusion {
namespace {

constexpr uint64_t kLengthMessage = 0;
constexpr uint64_t kBytesMessage = 1;
// Negotiation messages are small (a request list of a few thousand tensors is tens of KB); a
// length beyond this is a corrupt or foreign stream.
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 30;

void check_length(uint64_t length, int from) {
  if (length > kMaxMessageBytes) {
    RINGD_THROW(kProtocol, "negotiation message from rank " << from << " claims " << length
                                                            << " bytes; the stream is corrupt");
  }
}

}  // namespace

std::vector<std::string> gather_to_root(Context& ctx, const std::string& mine,
                                        std::chrono::milliseconds timeout) {
  const uint64_t op = ctx.next_operation_id();
  const int size = ctx.size();
  if (ctx.rank() != 0) {
    const uint64_t length = mine.size();
    RequestPtr header = ctx.pair(0).isend(&length, sizeof length, make_tag(op, kLengthMessage));
    RequestPtr body;
    if (length > 0) body = ctx.pair(0).isend(mine.data(), length, make_tag(op, kBytesMessage));
    header->wait(timeout);
    if (body) body->wait(timeout);
    return {};
  }
  std::vector<std::string> all(size);
  all[0] = mine;
  std::vector<uint64_t> lengths(size, 0);
  std::vector<RequestPtr> requests(size);
  for (int peer = 1; peer < size; ++peer) {
    requests[peer] =
        ctx.pair(peer).irecv(&lengths[peer], sizeof(uint64_t), make_tag(op, kLengthMessage));
  }
  for (int peer = 1; peer < size; ++peer) {
    requests[peer]->wait(timeout);
    check_length(lengths[peer], peer);
    all[peer].resize(lengths[peer]);
    requests[peer].reset();
    if (lengths[peer] > 0) {
      requests[peer] =
          ctx.pair(peer).irecv(all[peer].data(), lengths[peer], make_tag(op, kBytesMessage));
    }
  }
  for (int peer = 1; peer < size; ++peer) {
    if (requests[peer]) requests[peer]->wait(timeout);
  }
  return all;
}

std::string broadcast_from_root(Context& ctx, const std::string& bytes,
                                std::chrono::milliseconds timeout) {
  const uint64_t op = ctx.next_operation_id();
  if (ctx.rank() == 0) {
    const uint64_t length = bytes.size();
    std::vector<RequestPtr> requests;
    for (int peer = 1; peer < ctx.size(); ++peer) {
      requests.push_back(
          ctx.pair(peer).isend(&length, sizeof length, make_tag(op, kLengthMessage)));
      if (length > 0) {
        requests.push_back(ctx.pair(peer).isend(bytes.data(), length, make_tag(op, kBytesMessage)));
      }
    }
    for (auto& request : requests) request->wait(timeout);
    return bytes;
  }
  uint64_t length = 0;
  ctx.pair(0).irecv(&length, sizeof length, make_tag(op, kLengthMessage))->wait(timeout);
  check_length(length, 0);
  std::string received(length, '\0');
  if (length > 0) {
    ctx.pair(0).irecv(received.data(), length, make_tag(op, kBytesMessage))->wait(timeout);
  }
  return received;
}

}  // namespace ringd::fusion
