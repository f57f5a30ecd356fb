#include "net/acceptor.h"

#include <errno.h>
#include <sys/socket.h>

#include <algorithm>
#include <vector>

#include "common/logging.h"

namespace ringd::net {
namespace {
// Connections accepted per call before the other sockets of the loop get their turn.
constexpr int kAcceptBatch = 64;
constexpr std::chrono::milliseconds kFirstAcceptBackoff{100};
constexpr std::chrono::milliseconds kMaxAcceptBackoff{1000};
}  // namespace

// One accepted connection in its handshake.
class Acceptor::Pending : public IoHandler {
 public:
  Pending(Acceptor& owner, Fd socket, std::string from)
      : owner_(owner),
        socket_(std::move(socket)),
        from_(std::move(from)),
        source_(source_of(from_)),
        handshake_(owner.secret_, owner.acceptor_rank_, owner.callbacks_.admit) {}

  void on_io(uint32_t /*events*/) override {
    if (finished_) return;
    handshake_.advance(socket_.get());
    if (handshake_.state() != AcceptHandshake::State::kInProgress) owner_.finish(*this);
  }

  void on_deadline() {
    if (finished_) return;
    closed_because_ = "handshake not completed within " +
                      std::to_string(owner_.limits_.handshake_timeout.count()) + " ms";
    owner_.finish(*this);
  }

  bool silent() const { return !handshake_.hello_received(); }

  Acceptor& owner_;
  Fd socket_;
  const std::string from_;
  const std::string source_;
  AcceptHandshake handshake_;
  IoLoop::Id id_ = 0;
  bool finished_ = false;
  std::string closed_because_;  // timed out or evicted: no reply is sent
};

Acceptor::Acceptor(IoLoop& loop, Fd listener, std::string secret, int32_t acceptor_rank,
                   std::string self, Callbacks callbacks, Limits limits)
    : loop_(loop),
      listener_(std::move(listener)),
      secret_(std::move(secret)),
      acceptor_rank_(acceptor_rank),
      self_(std::move(self)),
      callbacks_(std::move(callbacks)),
      limits_(limits),
      log_(self_, limits.log_interval, limits.log_lines) {}

Acceptor::~Acceptor() { close(); }

void Acceptor::start(const std::shared_ptr<Acceptor>& self_pointer) {
  self_pointer_ = self_pointer;
  listener_id_ = loop_.add(listener_.get(), self_pointer);
}

void Acceptor::close() {
  for (auto& [id, pending] : pending_) pending->socket_.reset();
  pending_.clear();
  pending_per_source_.clear();
  listener_.reset();
}

void Acceptor::on_io(uint32_t /*events*/) {
  if (!listener_.valid() || accept_paused_) return;  // the back-off timer resumes
  for (int accepted = 0; accepted < kAcceptBatch; ++accepted) {
    Fd socket(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (socket.valid()) {
      accept_backoff_ = std::chrono::milliseconds(0);
      admit_new(std::move(socket));
      continue;
    }
    const int error = errno;
    if (error == EINTR || error == ECONNABORTED) continue;
    if (error == EAGAIN || error == EWOULDBLOCK) return;
    if (!accept_failed(error)) return;
  }
  loop_.wake(listener_id_);  // more may be waiting: go on after the other sockets had their turn
}

bool Acceptor::accept_failed(int error) {
  const bool out_of_descriptors = error == EMFILE || error == ENFILE;
  if ((out_of_descriptors || error == ENOBUFS || error == ENOMEM) &&
      evict_silent("",
                   "closed to free a file descriptor (accept failed: " + errno_text(error) + ")")) {
    return true;
  }
  accept_backoff_ = std::min(std::max(accept_backoff_ * 2, kFirstAcceptBackoff), kMaxAcceptBackoff);
  if (log_.warn("accept failed: " + errno_text(error) + " with " + std::to_string(pending_.size()) +
                " connections in their handshake" +
                (out_of_descriptors ? " (raise the open-files limit, ulimit -n)" : "") +
                "; accepting again in " + std::to_string(accept_backoff_.count()) + " ms")) {
    schedule_flush();
  }
  accept_paused_ = true;
  std::weak_ptr<Acceptor> weak = self_pointer_;
  loop_.add_timer(Clock::now() + accept_backoff_, [weak] {
    if (auto self = weak.lock()) {
      self->accept_paused_ = false;
      self->on_io(0);
    }
  });
  return false;
}

void Acceptor::admit_new(Fd socket) {
  const std::string from = remote_address(socket.get());
  auto pending = std::make_shared<Pending>(*this, std::move(socket), from);
  make_room(pending->source_);
  try {
    pending->id_ = loop_.add(pending->socket_.get(), pending);
  } catch (const Error& e) {
    log_rejection(from, e.what());
    return;
  }
  pending_[pending->id_] = pending;
  ++pending_per_source_[pending->source_];
  std::weak_ptr<Pending> weak = pending;
  loop_.add_timer(Clock::now() + limits_.handshake_timeout, [weak] {
    if (auto expired = weak.lock()) expired->on_deadline();
  });
}

void Acceptor::make_room(const std::string& source) {
  for (;;) {
    const auto mine = pending_per_source_.find(source);
    const size_t from_source = mine == pending_per_source_.end() ? 0 : mine->second;
    std::string victim_source;
    std::string why;
    if (from_source >= limits_.max_pending_per_source) {
      victim_source = source;
      why = std::to_string(from_source) + " connections from " + source +
            " were in their handshake (at most " + std::to_string(limits_.max_pending_per_source) +
            " per address)";
    } else if (pending_.size() >= limits_.max_pending) {
      const auto busiest =
          std::max_element(pending_per_source_.begin(), pending_per_source_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      victim_source = busiest->first;
      why = std::to_string(pending_.size()) + " connections were in their handshake (at most " +
            std::to_string(limits_.max_pending) + "), " + std::to_string(busiest->second) +
            " of them from " + victim_source;
    } else {
      return;
    }
    if (!evict_silent(victim_source, "closed to make room: " + why)) {
      // Every connection of that address has sent its hello: close the oldest of them.
      for (auto& [id, pending] : pending_) {
        if (pending->source_ != victim_source) continue;
        pending->closed_because_ = "closed to make room: " + why;
        finish(*pending);
        break;
      }
    }
  }
}

bool Acceptor::evict_silent(const std::string& source, const std::string& why) {
  std::vector<std::shared_ptr<Pending>> candidates;  // oldest first
  for (auto& [id, pending] : pending_) {
    if ((source.empty() || pending->source_ == source) && pending->silent()) {
      candidates.push_back(pending);
    }
  }
  for (auto& candidate : candidates) {
    candidate->on_io(0);                    // a last look: its hello may be waiting in the socket
    if (candidate->finished_) return true;  // it finished (or failed) its handshake just now
    if (!candidate->silent()) continue;
    candidate->closed_because_ = why + " and it had not sent a hello";
    finish(*candidate);
    return true;
  }
  return false;
}

void Acceptor::finish(Pending& pending) {
  pending.finished_ = true;
  loop_.remove(pending.id_, pending.socket_.get());
  const std::shared_ptr<Pending> keep = pending_[pending.id_];  // alive until we return
  pending_.erase(pending.id_);
  auto per_source = pending_per_source_.find(pending.source_);
  if (per_source != pending_per_source_.end() && --per_source->second == 0) {
    pending_per_source_.erase(per_source);
  }
  const AcceptHandshake& handshake = pending.handshake_;
  if (handshake.state() == AcceptHandshake::State::kAdmitted) {
    set_nodelay(pending.socket_.get());
    callbacks_.on_admitted(std::move(pending.socket_), handshake.hello());
    return;
  }
  const bool closed_by_us = !pending.closed_because_.empty();
  const std::string reason = closed_by_us ? pending.closed_because_ : handshake.reject_reason();
  const ErrorCode code = closed_by_us ? ErrorCode::kTimeout : handshake.reject_code();
  log_rejection(pending.from_, reason);
  if (!closed_by_us && !handshake.reject_reply().empty()) {
    send_immediately(pending.socket_.get(), handshake.reject_reply().data(),
                     handshake.reject_reply().size());
  }
  if (callbacks_.on_rejected) {
    callbacks_.on_rejected(handshake.hello_received() ? &handshake.hello() : nullptr, code, reason);
  }
  pending.socket_.reset();
}

void Acceptor::log_rejection(const std::string& from, const std::string& reason) {
  if (log_.rejected(from, reason)) schedule_flush();
}

void Acceptor::schedule_flush() {
  std::weak_ptr<Acceptor> weak = self_pointer_;
  loop_.add_timer(log_.interval_end(), [weak] {
    auto self = weak.lock();
    // A timer of an interval that rejected() already closed is early for the current one.
    if (self && Clock::now() >= self->log_.interval_end()) self->log_.flush();
  });
}

}  // namespace ringd::net
