#include "launcher/exec_handshakes.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "ringd/error.h"

namespace ringd::launcher {

struct PendingHandshakes::Entry {
  net::Fd fd;
  std::string caller;
  std::string source;  // the address without the port
  net::Deadline deadline;
  std::unique_ptr<exec::ServerHandshake> handshake;  // null: a refusal being delivered
  uint8_t input[exec::kFrameHeaderBytes + 16] = {};
  size_t have = 0;
  size_t discard = 0;  // refusing: bytes of the caller's first frame still to read and drop
  std::string output;  // bytes still to send
};

namespace {

// Sends what it can; false when the connection failed.
bool flush(int fd, std::string* output) {
  while (!output->empty()) {
    const ssize_t sent = ::send(fd, output->data(), output->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) {
      output->erase(0, static_cast<size_t>(sent));
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else {
      return sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }
  return true;
}

// recv() without blocking: bytes read, 0 at the end of stream, -1 for nothing yet, -2 on error.
ssize_t read_some(int fd, void* into, size_t bytes) {
  while (true) {
    const ssize_t got = ::recv(fd, into, bytes, MSG_DONTWAIT);
    if (got >= 0) return got;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
  }
}

}  // namespace

PendingHandshakes::PendingHandshakes(const std::string& secret, HandshakeLimits limits)
    : secret_(secret), limits_(limits) {}

PendingHandshakes::~PendingHandshakes() = default;

void PendingHandshakes::add(net::Fd fd, std::vector<DroppedHandshake>* dropped) {
  auto entry = std::make_unique<Entry>();
  const std::string address = net::remote_address(fd.get());
  entry->caller = "exec caller " + address;
  entry->source = address.substr(0, address.rfind(':'));
  entry->deadline = net::Clock::now() + limits_.timeout;
  entry->handshake = std::make_unique<exec::ServerHandshake>(secret_, entry->caller);
  entry->fd = std::move(fd);

  std::map<std::string, size_t> per_source;
  for (const auto& existing : entries_) ++per_source[existing->source];
  std::string crowded;  // the source to push a connection out of
  std::string why;
  if (per_source[entry->source] >= limits_.max_per_source) {
    crowded = entry->source;
    why = std::to_string(limits_.max_per_source) + " newer connections from " + crowded;
  } else if (entries_.size() >= limits_.max_total) {
    for (const auto& [source, count] : per_source) {
      if (crowded.empty() || count > per_source[crowded]) crowded = source;
    }
    why = std::to_string(limits_.max_total) + " newer connections in all";
  }
  if (!crowded.empty()) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i]->source == crowded) {
        push_out(i,
                 "pushed out of the handshake by " + why + " (the agent holds at most " +
                     std::to_string(limits_.max_per_source) + " per address and " +
                     std::to_string(limits_.max_total) + " in all)",
                 dropped);
        break;
      }
    }
  }
  entries_.push_back(std::move(entry));
}

void PendingHandshakes::refuse(Authenticated connection, const std::string& reason) {
  auto entry = std::make_unique<Entry>();
  exec::Channel channel(connection.fd.get(), connection.keys, connection.caller);
  entry->output = channel.encode(exec::MessageType::kRefused, reason);
  entry->caller = std::move(connection.caller);
  entry->source = "(authenticated)";
  entry->deadline = net::Clock::now() + limits_.timeout;
  entry->fd = std::move(connection.fd);
  flush(entry->fd.get(), &entry->output);
  entries_.push_back(std::move(entry));
}

void PendingHandshakes::push_out(size_t index, const std::string& why,
                                 std::vector<DroppedHandshake>* dropped) {
  if (entries_[index]->handshake) dropped->push_back({entries_[index]->caller, why, true, false});
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
}

void PendingHandshakes::append_pollfds(std::vector<pollfd>* fds) const {
  for (const auto& entry : entries_) {
    const short events = static_cast<short>(entry->output.empty() ? POLLIN : POLLIN | POLLOUT);
    fds->push_back({entry->fd.get(), events, 0});
  }
}

int PendingHandshakes::timeout_ms() const {
  if (entries_.empty()) return -1;
  net::Deadline nearest = entries_.front()->deadline;
  for (const auto& entry : entries_) nearest = std::min(nearest, entry->deadline);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(nearest - net::Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

void PendingHandshakes::advance(const pollfd* fds, std::vector<Authenticated>* done,
                                std::vector<DroppedHandshake>* dropped) {
  const net::Deadline now = net::Clock::now();
  std::vector<std::unique_ptr<Entry>> kept;
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry* entry = entries_[i].get();
    const short revents = fds[i].revents;
    if (revents != 0 && !step(entry, revents, done, dropped)) continue;
    if (now >= entry->deadline) {
      if (entry->handshake) {
        dropped->push_back({entry->caller,
                            "no exec handshake within " + std::to_string(limits_.timeout.count()) +
                                " ms of connecting",
                            true, false});
      }
      continue;
    }
    kept.push_back(std::move(entries_[i]));
  }
  entries_ = std::move(kept);
}

bool PendingHandshakes::step(Entry* entry, short revents, std::vector<Authenticated>* done,
                             std::vector<DroppedHandshake>* dropped) {
  const int fd = entry->fd.get();
  const auto drop = [&](const std::string& why, bool quiet, bool auth) {
    if (entry->handshake) dropped->push_back({entry->caller, why, quiet, auth});
    return false;
  };
  if (!flush(fd, &entry->output))
    return drop("the connection failed during the handshake", true, false);
  if (!entry->handshake) {  // a refusal: read and drop the caller's first frame, then close
    while (true) {
      uint8_t scrap[4096];
      const bool header = entry->have < exec::kFrameHeaderBytes;
      const size_t want =
          header ? exec::kFrameHeaderBytes - entry->have : std::min(sizeof(scrap), entry->discard);
      if (want == 0) return !entry->output.empty();
      const ssize_t got = read_some(fd, header ? entry->input + entry->have : scrap, want);
      if (got == -1) return true;
      if (got <= 0) return false;
      if (!header) {
        entry->discard -= static_cast<size_t>(got);
        continue;
      }
      entry->have += static_cast<size_t>(got);
      if (entry->have == exec::kFrameHeaderBytes) {
        uint32_t payload = 0;
        std::memcpy(&payload, entry->input + 4, 4);
        entry->discard = std::min<size_t>(payload, exec::kMaxPayloadBytes) + 32;
      }
    }
  }
  while (!entry->handshake->done()) {
    const size_t wanted = entry->handshake->wanted();
    const ssize_t got = read_some(fd, entry->input + entry->have, wanted - entry->have);
    if (got == -1) break;
    if (got == 0) return drop("closed the connection during the exec handshake", true, false);
    if (got < 0) {
      return drop(
          std::string("the connection failed during the exec handshake: ") + std::strerror(errno),
          true, false);
    }
    entry->have += static_cast<size_t>(got);
    if (entry->have < wanted) continue;
    entry->have = 0;
    try {
      entry->handshake->consume(entry->input, &entry->output);
    } catch (const Error& error) {
      flush(fd, &entry->output);  // best effort: our header, or the wrong-secret status
      return drop(error.what(), false, error.code() == ErrorCode::kAuth);
    }
    if (!flush(fd, &entry->output)) {
      return drop("the connection failed during the exec handshake", true, false);
    }
  }
  if (revents & (POLLERR | POLLNVAL)) return drop("the connection failed", true, false);
  if (!entry->handshake->done() || !entry->output.empty()) return true;
  done->push_back({std::move(entry->fd), entry->caller, entry->handshake->keys(), entry->deadline});
  return false;
}

}  // namespace ringd::launcher
