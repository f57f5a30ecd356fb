#include "transport/tcp/acceptor.h"

#include <errno.h>
#include <sys/socket.h>

#include "common/logging.h"

namespace ringd::tcp {
namespace {
constexpr size_t kMaxPendingHandshakes = 128;
}  // namespace

// One accepted connection in its handshake.
class Acceptor::Pending : public IoHandler {
 public:
  Pending(Acceptor& owner, Fd socket, std::string from)
      : owner_(owner),
        socket_(std::move(socket)),
        from_(std::move(from)),
        handshake_(owner.secret_, owner.acceptor_rank_, owner.callbacks_.admit) {}

  void on_io(uint32_t /*events*/) override {
    if (finished_) return;
    handshake_.advance(socket_.get());
    if (handshake_.state() != AcceptHandshake::State::kInProgress) owner_.finish(*this);
  }

  void on_deadline() {
    if (finished_) return;
    timed_out_ = true;
    owner_.finish(*this);
  }

  Acceptor& owner_;
  Fd socket_;
  const std::string from_;
  AcceptHandshake handshake_;
  IoLoop::Id id_ = 0;
  bool finished_ = false;
  bool timed_out_ = false;
};

Acceptor::Acceptor(IoLoop& loop, Fd listener, std::string secret, int32_t acceptor_rank,
                   std::string self, Callbacks callbacks)
    : loop_(loop),
      listener_(std::move(listener)),
      secret_(std::move(secret)),
      acceptor_rank_(acceptor_rank),
      self_(std::move(self)),
      callbacks_(std::move(callbacks)) {}

Acceptor::~Acceptor() { close(); }

void Acceptor::start(const std::shared_ptr<Acceptor>& self_pointer) {
  loop_.add(listener_.get(), self_pointer);
}

void Acceptor::close() {
  for (auto& [id, pending] : pending_) pending->socket_.reset();
  pending_.clear();
  listener_.reset();
}

void Acceptor::on_io(uint32_t /*events*/) {
  for (;;) {
    Fd socket(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!socket.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        RINGD_LOG(kWarn) << self_ << ": accept failed: " << errno_text(errno);
      }
      return;
    }
    const std::string from = remote_address(socket.get());
    if (pending_.size() >= kMaxPendingHandshakes) {
      RINGD_LOG(kWarn) << self_ << ": rejected connection from " << from << ": more than "
                       << kMaxPendingHandshakes << " connections are in their handshake";
      continue;
    }
    auto pending = std::make_shared<Pending>(*this, std::move(socket), from);
    pending->id_ = loop_.add(pending->socket_.get(), pending);
    pending_[pending->id_] = pending;
    loop_.add_timer(Clock::now() + kHandshakeTimeout, [pending] { pending->on_deadline(); });
  }
}

void Acceptor::finish(Pending& pending) {
  pending.finished_ = true;
  loop_.remove(pending.id_, pending.socket_.get());
  const std::shared_ptr<Pending> keep = pending_[pending.id_];  // alive until we return
  pending_.erase(pending.id_);
  const AcceptHandshake& handshake = pending.handshake_;
  if (handshake.state() == AcceptHandshake::State::kAdmitted) {
    set_nodelay(pending.socket_.get());
    callbacks_.on_admitted(std::move(pending.socket_), handshake.hello());
    return;
  }
  const std::string reason =
      pending.timed_out_
          ? "handshake not completed within " + std::to_string(kHandshakeTimeout.count()) + " ms"
          : handshake.reject_reason();
  const ErrorCode code = pending.timed_out_ ? ErrorCode::kTimeout : handshake.reject_code();
  RINGD_LOG(kWarn) << self_ << ": rejected connection from " << pending.from_ << ": " << reason;
  if (!pending.timed_out_ && !handshake.reject_reply().empty()) {
    send_immediately(pending.socket_.get(), handshake.reject_reply().data(),
                     handshake.reject_reply().size());
  }
  if (callbacks_.on_rejected) {
    callbacks_.on_rejected(handshake.hello_received() ? &handshake.hello() : nullptr, code, reason);
  }
  pending.socket_.reset();
}

}  // namespace ringd::tcp
