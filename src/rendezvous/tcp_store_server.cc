// TcpStoreServer: one epoll I/O thread serving many store clients (see tcp_store_protocol.h).
// Everything below runs on that thread, so the key/value map needs no lock.
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "common/logging.h"
#include "net/acceptor.h"
#include "net/io_loop.h"
#include "rendezvous/tcp_store_protocol.h"
#include "ringd/store.h"

namespace ringd {

using store_protocol::RequestHeader;
using store_protocol::Status;

namespace {
class StoreConnection;
constexpr size_t kValueReadBytes = 64 << 10;  // a value arrives in pieces of at most this
}  // namespace

struct TcpStoreServer::Impl {
  net::IoLoop loop{"TCP store server"};
  std::shared_ptr<net::Acceptor> acceptor;
  uint16_t port = 0;
  std::string name;  // "TCP store server 127.0.0.1:4000"
  std::map<std::string, std::vector<uint8_t>> values;
  // Keys and values stored, plus the bytes of values still arriving; at most max_held_bytes.
  std::atomic<size_t> held_bytes{0};
  size_t max_held_bytes = TcpStoreServer::kDefaultMaxHeldBytes;
  std::vector<uint8_t> piece_buffer = std::vector<uint8_t>(kValueReadBytes);  // one I/O thread
  std::multimap<std::string, std::weak_ptr<StoreConnection>> waiters;
  std::map<net::IoLoop::Id, std::shared_ptr<StoreConnection>> connections;
  mutable std::mutex refused_mutex;  // the loop thread writes, any thread reads
  size_t refused_for_secret = 0;
  std::string last_refused;
};

namespace {

class StoreConnection : public net::IoHandler,
                        public std::enable_shared_from_this<StoreConnection> {
 public:
  StoreConnection(TcpStoreServer::Impl& server, net::Fd socket, std::string from)
      : server_(server), socket_(std::move(socket)), from_(std::move(from)) {}

  void start() {
    id_ = server_.loop.add(socket_.get(), shared_from_this());
    server_.connections[id_] = shared_from_this();
  }

  void on_io(uint32_t events) override {
    const bool hung_up = (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    if (waiting_ && hung_up) return close();
    progress();
    // A get that waits, sent with the client's end of stream: no later event will say the client
    // is gone (the loop is edge-triggered), so its wait would hold the connection until the get's
    // timeout, up to 49 days (found by tests/fuzz/store_fuzz.cc).
    if (waiting_ && hung_up) close();
  }

  // Answers a waiting get (the key was set, or its timer fired).
  void answer(Status status, const std::vector<uint8_t>& value) {
    waiting_ = false;
    respond(status, value.data(), value.size());
    progress();
  }

  bool waiting_for(const std::string& key, uint64_t generation) const {
    return waiting_ && socket_.valid() && key_ == key && generation == generation_;
  }

 private:
  void progress() {
    while (socket_.valid() && flush() && !waiting_ && !close_after_flush_ && read_request()) {
      handle_request();
    }
  }

  bool flush() {
    while (out_sent_ < out_.size()) {
      const ssize_t sent = ::send(socket_.get(), out_.data() + out_sent_, out_.size() - out_sent_,
                                  MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent > 0) {
        out_sent_ += static_cast<size_t>(sent);
      } else if (sent < 0 && errno == EINTR) {
        continue;
      } else {
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
        close();
        return false;
      }
    }
    out_.clear();
    out_sent_ = 0;
    if (close_after_flush_) close();
    return socket_.valid();
  }

  // Reads `want` bytes into `into`; false when incomplete (or the connection closed).
  bool read_into(uint8_t* into, size_t want, size_t* got) {
    while (*got < want) {
      const ssize_t n = ::recv(socket_.get(), into + *got, want - *got, MSG_DONTWAIT);
      if (n > 0) {
        *got += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) close();
        return false;
      }
    }
    return true;
  }

  bool read_request() {
    if (!header_done_) {
      if (!read_into(reinterpret_cast<uint8_t*>(&header_), sizeof(header_), &header_got_)) {
        return false;
      }
      const std::string problem = check_header();
      if (!problem.empty()) {
        RINGD_LOG(kWarn) << server_.name << ": closing the connection from " << from_ << ": "
                         << problem;
        protocol_error(problem);
        return false;
      }
      header_done_ = true;
      key_.assign(header_.key_bytes, '\0');  // at most kMaxKeyBytes
      release_value();
      key_got_ = 0;
    }
    if (!read_into(reinterpret_cast<uint8_t*>(key_.data()), key_.size(), &key_got_)) return false;
    return read_value();
  }

  // Reads the value in pieces of at most kValueReadBytes, growing value_ (and the server's
  // held_bytes) only by what arrived: a request announcing 64 MiB and sending nothing costs
  // nothing.
  bool read_value() {
    while (value_.size() < header_.value_bytes) {
      const size_t piece = std::min<size_t>(kValueReadBytes, header_.value_bytes - value_.size());
      if (server_.held_bytes.load() + piece > server_.max_held_bytes) {
        const std::string problem = "the store holds " + std::to_string(server_.held_bytes.load()) +
                                    " bytes and its " + std::to_string(server_.max_held_bytes) +
                                    "-byte budget leaves no room for this " +
                                    std::to_string(header_.value_bytes) + "-byte value";
        RINGD_LOG(kWarn) << server_.name << ": closing the connection from " << from_ << ": "
                         << problem;
        protocol_error(problem);
        return false;
      }
      size_t got = 0;
      uint8_t* piece_buffer = server_.piece_buffer.data();
      const bool complete = read_into(piece_buffer, piece, &got);
      if (!socket_.valid()) return false;  // closed: close() gave value_'s bytes back
      value_.insert(value_.end(), piece_buffer, piece_buffer + got);
      server_.held_bytes += got;
      if (!complete) return false;
    }
    return true;
  }

  // Gives back what value_ holds (a finished set moved it into the map, already counted there).
  void release_value() {
    server_.held_bytes -= value_.size();
    value_.clear();
    value_.shrink_to_fit();
  }

  std::string check_header() const {
    if (header_.magic != store_protocol::kMagic) return "not a ringd store request";
    if (header_.op != static_cast<uint32_t>(store_protocol::Op::kSet) &&
        header_.op != static_cast<uint32_t>(store_protocol::Op::kGet) &&
        header_.op != static_cast<uint32_t>(store_protocol::Op::kAdd)) {
      return "unknown store operation " + std::to_string(header_.op);
    }
    if (header_.key_bytes > store_protocol::kMaxKeyBytes) {
      return "key of " + std::to_string(header_.key_bytes) + " bytes exceeds the " +
             std::to_string(store_protocol::kMaxKeyBytes) + "-byte limit";
    }
    if (header_.value_bytes > store_protocol::kMaxValueBytes) {
      return "value of " + std::to_string(header_.value_bytes) + " bytes exceeds the " +
             std::to_string(store_protocol::kMaxValueBytes) + "-byte limit";
    }
    return "";
  }

  void handle_request() {
    header_done_ = false;
    header_got_ = 0;
    const auto op = static_cast<store_protocol::Op>(header_.op);
    if (op == store_protocol::Op::kSet || op == store_protocol::Op::kAdd) {
      auto existing = server_.values.find(key_);
      if (existing != server_.values.end()) {
        if (op == store_protocol::Op::kAdd) {
          release_value();
          respond(Status::kExists, existing->second.data(), existing->second.size());
          return;
        }
        if (key_.rfind(store_protocol::kReservedPrefix, 0) == 0) {
          release_value();
          const std::string problem = "key '" + key_ + "' is a record of the job (" +
                                      store_protocol::kReservedPrefix +
                                      "...) and cannot be replaced";
          RINGD_LOG(kWarn) << server_.name << ": closing the connection from " << from_ << ": "
                           << problem;
          protocol_error(problem);
          return;
        }
      }
      store_value();
      return;
    }
    auto found = server_.values.find(key_);
    if (found != server_.values.end()) {
      respond(Status::kOk, found->second.data(), found->second.size());
      return;
    }
    waiting_ = true;
    const uint64_t generation = ++generation_;
    server_.waiters.emplace(key_, weak_from_this());
    std::weak_ptr<StoreConnection> self = weak_from_this();
    const std::string key = key_;
    server_.loop.add_timer(net::Clock::now() + std::chrono::milliseconds(header_.timeout_ms),
                           [self, key, generation] {
                             auto connection = self.lock();
                             if (connection && connection->waiting_for(key, generation)) {
                               connection->answer(Status::kTimeout, {});
                             }
                           });
  }

  // A set (or an add of a missing key): stores value_ under key_ and answers the waiting gets.
  void store_value() {
    // The value's bytes were counted as they arrived; the key is counted now, and a replaced
    // value is given back.
    auto existing = server_.values.find(key_);
    if (existing != server_.values.end()) {
      server_.held_bytes -= existing->first.size() + existing->second.size();
    }
    server_.held_bytes += key_.size();
    server_.values[key_] = std::move(value_);
    value_.clear();
    respond(Status::kOk, nullptr, 0);
    const std::vector<uint8_t>& stored = server_.values[key_];
    auto [first, last] = server_.waiters.equal_range(key_);
    std::vector<std::shared_ptr<StoreConnection>> ready;
    for (auto it = first; it != last; ++it) {
      if (auto waiter = it->second.lock()) ready.push_back(waiter);
    }
    server_.waiters.erase(first, last);
    for (auto& waiter : ready) {
      if (waiter->waiting_ && waiter->key_ == key_) waiter->answer(Status::kOk, stored);
    }
  }

  void respond(Status status, const uint8_t* value, size_t bytes) {
    store_protocol::ResponseHeader header{store_protocol::kMagic, static_cast<uint32_t>(status),
                                          bytes};
    const uint8_t* raw = reinterpret_cast<const uint8_t*>(&header);
    out_.insert(out_.end(), raw, raw + sizeof(header));
    if (bytes > 0) out_.insert(out_.end(), value, value + bytes);
  }

  void protocol_error(const std::string& problem) {
    respond(Status::kError, reinterpret_cast<const uint8_t*>(problem.data()), problem.size());
    close_after_flush_ = true;
    flush();
  }

  void close() {
    if (!socket_.valid()) return;
    release_value();  // a value that stopped half-way
    server_.loop.remove(id_, socket_.get());
    socket_.reset();
    waiting_ = false;
    server_.connections.erase(id_);  // the loop holds us until on_io returns
  }

  TcpStoreServer::Impl& server_;
  net::Fd socket_;
  const std::string from_;
  net::IoLoop::Id id_ = 0;
  RequestHeader header_{};
  size_t header_got_ = 0;
  bool header_done_ = false;
  std::string key_;
  size_t key_got_ = 0;
  std::vector<uint8_t> value_;  // its size: the bytes that arrived (counted in held_bytes)
  bool waiting_ = false;
  uint64_t generation_ = 0;
  std::vector<uint8_t> out_;
  size_t out_sent_ = 0;
  bool close_after_flush_ = false;
};

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, const std::string& secret,
                               size_t max_held_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->max_held_bytes = max_held_bytes;
  net::Fd listener = net::listen_on(host, port, {});
  impl_->port = net::local_port(listener.get());
  impl_->name = "TCP store server " + host + ":" + std::to_string(impl_->port);
  Impl& server = *impl_;
  net::Acceptor::Callbacks callbacks;
  callbacks.admit = [](const net::HelloInfo& hello) -> std::string {
    return hello.kind == net::PeerKind::kStoreClient ? "" : "this port serves the TCP store";
  };
  callbacks.on_rejected = [&server](const net::HelloInfo*, ErrorCode code,
                                    const std::string& reason) {
    if (code != ErrorCode::kAuth) return;
    std::lock_guard<std::mutex> lock(server.refused_mutex);
    ++server.refused_for_secret;
    server.last_refused = reason;
  };
  callbacks.on_admitted = [&server](net::Fd socket, const net::HelloInfo&) {
    const std::string from = net::remote_address(socket.get());
    auto connection = std::make_shared<StoreConnection>(server, std::move(socket), from);
    connection->start();
  };
  impl_->acceptor =
      std::make_shared<net::Acceptor>(impl_->loop, std::move(listener), net::resolve_secret(secret),
                                      -1, impl_->name, std::move(callbacks));
  impl_->acceptor->start(impl_->acceptor);
  RINGD_LOG(kInfo) << impl_->name << ": serving";
}

TcpStoreServer::~TcpStoreServer() {
  impl_->loop.stop();
  impl_->acceptor->close();
  impl_->waiters.clear();
  impl_->connections.clear();  // closes the client sockets
}

uint16_t TcpStoreServer::port() const { return impl_->port; }

std::string TcpStoreServer::refused_for_secret() const {
  std::lock_guard<std::mutex> lock(impl_->refused_mutex);
  if (impl_->refused_for_secret == 0) return "";
  return "the rendezvous store refused " + std::to_string(impl_->refused_for_secret) +
         " connection(s) that failed the job-secret handshake (the last: " + impl_->last_refused +
         ")";
}

size_t TcpStoreServer::held_bytes() const { return impl_->held_bytes.load(); }

}  // namespace ringd
