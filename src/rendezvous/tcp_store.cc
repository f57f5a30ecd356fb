// TcpStore: the client of a TcpStoreServer (protocol in tcp_store_protocol.h). Requests are
// synchronous and serialised by a mutex; the socket is non-blocking and every wait is a poll()
// with a deadline.
#include <algorithm>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/handshake.h"
#include "net/socket.h"
#include "rendezvous/tcp_store_protocol.h"
#include "ringd/error.h"
#include "ringd/store.h"

namespace ringd {

using store_protocol::Status;

struct TcpStore::Impl {
  net::Endpoint endpoint;
  std::string secret;
  std::chrono::milliseconds timeout{0};
  std::string name;  // "the TCP store at 127.0.0.1:4000"
  std::mutex mutex;
  net::Fd socket;  // guarded by mutex

  void connect(net::Deadline deadline);
  std::vector<uint8_t> request(store_protocol::Op op, const std::string& key,
                               const std::vector<uint8_t>& value, uint32_t wait_ms,
                               net::Deadline deadline, Status* status);
  [[noreturn]] void lost(net::IoStatus status, int error, const std::string& key);
};

// Retries refused or dropped connections with back-off until `deadline` (the server may start
// after its clients).
void TcpStore::Impl::connect(net::Deadline deadline) {
  net::HelloInfo hello;
  hello.kind = net::PeerKind::kStoreClient;
  std::string last_error;
  int attempts = 0;
  socket = net::dial_with_retry(endpoint, {}, secret, hello, -1, "TCP store client", name, deadline,
                                &last_error, &attempts);
  if (!socket.valid()) {
    RINGD_THROW(kTimeout, "rendezvous: could not reach " << name << " within " << timeout.count()
                                                         << " ms (last error: " << last_error
                                                         << ") — is the rendezvous server up?");
  }
}

void TcpStore::Impl::lost(net::IoStatus status, int error, const std::string& key) {
  socket.reset();  // the stream is out of step now; the next request reconnects
  if (status == net::IoStatus::kTimeout) {
    RINGD_THROW(kTimeout, "rendezvous: " << name << " did not answer the request for key '" << key
                                         << "' in time");
  }
  RINGD_THROW(kPeerLost, "rendezvous: lost the connection to "
                             << name << " during the request for key '" << key
                             << "': " << net::io_status_text(status, error));
}

std::vector<uint8_t> TcpStore::Impl::request(store_protocol::Op op, const std::string& key,
                                             const std::vector<uint8_t>& value, uint32_t wait_ms,
                                             net::Deadline deadline, Status* status) {
  RINGD_CHECK_ARG(key.size() <= store_protocol::kMaxKeyBytes,
                  "rendezvous: key of " << key.size() << " bytes exceeds the TCP store's "
                                        << store_protocol::kMaxKeyBytes << "-byte limit");
  RINGD_CHECK_ARG(value.size() <= store_protocol::kMaxValueBytes,
                  "rendezvous: value of " << value.size() << " bytes for key '" << key
                                          << "' exceeds the TCP store's 64 MiB limit");
  if (!socket.valid()) connect(net::Clock::now() + timeout);
  const store_protocol::RequestHeader header{store_protocol::kMagic, static_cast<uint32_t>(op),
                                             static_cast<uint32_t>(key.size()), wait_ms,
                                             value.size()};
  std::vector<uint8_t> message(reinterpret_cast<const uint8_t*>(&header),
                               reinterpret_cast<const uint8_t*>(&header) + sizeof(header));
  message.insert(message.end(), key.begin(), key.end());
  message.insert(message.end(), value.begin(), value.end());
  int error = 0;
  net::IoStatus io = net::send_all(socket.get(), message.data(), message.size(), deadline, &error);
  if (io != net::IoStatus::kOk) lost(io, error, key);
  store_protocol::ResponseHeader response{};
  io = net::recv_exact(socket.get(), &response, sizeof(response), deadline, &error);
  if (io != net::IoStatus::kOk) lost(io, error, key);
  // Only the answers this request can have: an unknown status (or "exists" to a get) must not
  // read as success — for an add, that would be a claim this client never won.
  const bool status_fits =
      response.status == static_cast<uint32_t>(Status::kOk) ||
      response.status == static_cast<uint32_t>(Status::kError) ||
      (op == store_protocol::Op::kGet &&
       response.status == static_cast<uint32_t>(Status::kTimeout)) ||
      (op == store_protocol::Op::kAdd && response.status == static_cast<uint32_t>(Status::kExists));
  if (response.magic != store_protocol::kMagic || !status_fits ||
      response.value_bytes > store_protocol::kMaxValueBytes) {
    socket.reset();
    RINGD_THROW(kProtocol,
                "rendezvous: " << name << " sent a malformed response for key '" << key << "'");
  }
  std::vector<uint8_t> body(response.value_bytes);
  io = net::recv_exact(socket.get(), body.data(), body.size(), deadline, &error);
  if (io != net::IoStatus::kOk) lost(io, error, key);
  *status = static_cast<Status>(response.status);
  if (*status == Status::kError) {
    socket.reset();
    RINGD_THROW(kProtocol, "rendezvous: " << name << " rejected the request for key '" << key
                                          << "': " << to_string(body));
  }
  return body;
}

TcpStore::TcpStore(const std::string& host, uint16_t port, const std::string& secret,
                   std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->endpoint = net::Endpoint{host, port};
  impl_->secret = net::resolve_secret(secret);
  impl_->timeout = timeout.count() > 0 ? timeout : tunables().timeout;
  impl_->name = "the TCP store at " + impl_->endpoint.to_string();
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->connect(net::Clock::now() + impl_->timeout);
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Status status = Status::kOk;
  impl_->request(store_protocol::Op::kSet, key, value, 0, net::Clock::now() + impl_->timeout,
                 &status);
}

bool TcpStore::add(const std::string& key, const std::vector<uint8_t>& value,
                   std::vector<uint8_t>* existing) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Status status = Status::kOk;
  std::vector<uint8_t> stored = impl_->request(store_protocol::Op::kAdd, key, value, 0,
                                               net::Clock::now() + impl_->timeout, &status);
  if (status != Status::kExists) return true;
  if (existing) *existing = std::move(stored);
  return false;
}

std::vector<uint8_t> TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const auto wait_ms = std::clamp<int64_t>(timeout.count(), 0, UINT32_MAX);
  // The server answers "timeout" itself; the extra grace only covers a server that went silent.
  const net::Deadline deadline =
      net::Clock::now() + std::chrono::milliseconds(wait_ms) + std::chrono::seconds(5);
  Status status = Status::kOk;
  std::vector<uint8_t> value = impl_->request(store_protocol::Op::kGet, key, {},
                                              static_cast<uint32_t>(wait_ms), deadline, &status);
  if (status == Status::kTimeout) {
    RINGD_THROW(kTimeout, "rendezvous: key '" << key << "' did not appear in " << impl_->name
                                              << " within " << timeout.count()
                                              << " ms — did every rank start?");
  }
  return value;
}

}  // namespace ringd
