#include "ps/frame.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/text.h"
#include "ringd/error.h"

namespace ringd::ps {
namespace {

std::string hex_magic(const uint8_t* bytes) { return "0x" + hex(bytes, 4); }

uint32_t read_u32(const uint8_t* bytes) {
  uint32_t value = 0;
  std::memcpy(&value, bytes, 4);
  return value;
}

}  // namespace

Connection::Connection(net::Fd socket, std::string peer, std::chrono::milliseconds timeout)
    : socket_(std::move(socket)), peer_(std::move(peer)), timeout_(timeout) {}

void Connection::fail(net::IoStatus status, int error, const std::string& what) {
  socket_.reset();  // out of step now: nothing more can be read or written on it
  if (status == net::IoStatus::kTimeout) {
    RINGD_THROW(kTimeout, peer_ << " did not answer within " << timeout_.count() << " ms during "
                                << what << " (RINGD_TIMEOUT; is it alive and reachable?)");
  }
  RINGD_THROW(kPeerLost, "lost the connection to " << peer_ << " during " << what << ": "
                                                   << net::io_status_text(status, error));
}

void Connection::check_readable(const std::string& what) const {
  if (!socket_.valid()) {
    RINGD_THROW(kPeerLost, "the connection to " << peer_ << " is closed (" << what << ")");
  }
  if (broken_) {
    RINGD_THROW(kProtocol, "the connection to " << peer_ << " is out of step after a malformed "
                                                << "message (" << what << ")");
  }
}

namespace {

// The frame prefix and the encoded header, with payload_bytes set.
std::vector<uint8_t> encode_frame(ps::Header header, uint64_t payload_bytes) {
  header.set_payload_bytes(payload_bytes);
  const std::string encoded = header.SerializeAsString();
  std::vector<uint8_t> message(kFramePrefixBytes + encoded.size());
  const uint32_t words[4] = {0, kFrameVersion, static_cast<uint32_t>(encoded.size()), 0};
  std::memcpy(message.data(), words, sizeof(words));
  std::memcpy(message.data(), kFrameMagic, 4);
  std::memcpy(message.data() + kFramePrefixBytes, encoded.data(), encoded.size());
  return message;
}

}  // namespace

bool Connection::send_if_room(const ps::Header& header) {
  if (!socket_.valid()) return false;
  const std::vector<uint8_t> message = encode_frame(header, 0);
  return net::send_immediately(socket_.get(), message.data(), message.size());
}

void Connection::send(ps::Header header, const std::vector<PayloadPart>& parts,
                      const std::string& what) {
  if (!socket_.valid()) RINGD_THROW(kPeerLost, "the connection to " << peer_ << " is closed");
  uint64_t payload = 0;
  for (const PayloadPart& part : parts) payload += part.bytes;
  const std::vector<uint8_t> message = encode_frame(std::move(header), payload);
  const net::Deadline deadline = net::Clock::now() + timeout_;
  int error = 0;
  net::IoStatus status =
      net::send_all(socket_.get(), message.data(), message.size(), deadline, &error);
  for (size_t part = 0; status == net::IoStatus::kOk && part < parts.size(); ++part) {
    // The limit is on silence, not on the transfer's length: a 400 MB tensor to one of eight
    // workers behind one 1 Gbit/s port takes half a minute, every moment of it making progress.
    status =
        net::send_all_idle(socket_.get(), parts[part].data, parts[part].bytes, timeout_, &error);
  }
  if (status == net::IoStatus::kClosed) {
    int code = 0;
    const std::string reason = error_left_by_peer(&code);
    if (!reason.empty()) {
      socket_.reset();
      throw_remote_error(peer_, static_cast<uint32_t>(code), reason);
    }
  }
  if (status != net::IoStatus::kOk) fail(status, error, what);
}

bool Connection::receive_header(ps::Header* header, bool wait_forever, int stop_fd, bool* closed,
                                const std::string& what) {
  if (closed) *closed = false;
  check_readable(what);
  if (pending_payload_ > 0) skip_payload(pending_payload_, what);
  const net::Deadline deadline = net::Clock::now() + timeout_;
  // Sleep until the first byte (or a hang-up) arrives, or stop_fd is signalled.
  for (;;) {
    pollfd entries[2] = {{socket_.get(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int count = stop_fd >= 0 ? 2 : 1;
    const int wait_ms =
        wait_forever ? -1
                     : static_cast<int>(std::min<int64_t>(net::remaining_ms(deadline), 1 << 30));
    if (!wait_forever && wait_ms <= 0) fail(net::IoStatus::kTimeout, 0, what);
    const int ready = ::poll(entries, count, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(net::IoStatus::kError, errno, what);
    if (count == 2 && entries[1].revents != 0) return false;
    if (ready > 0) break;
  }
  uint8_t prefix[kFramePrefixBytes];
  ssize_t got = 0;
  do {
    got = ::recv(socket_.get(), prefix, sizeof(prefix), MSG_DONTWAIT);
  } while (got < 0 && errno == EINTR);
  if (got == 0 && closed) {
    *closed = true;
    socket_.reset();
    return false;
  }
  if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    fail(errno == ECONNRESET ? net::IoStatus::kClosed : net::IoStatus::kError, errno, what);
  }
  if (got == 0) fail(net::IoStatus::kClosed, 0, what);
  const size_t have = got > 0 ? static_cast<size_t>(got) : 0;
  int error = 0;
  net::IoStatus status = net::recv_exact(socket_.get(), prefix + have, sizeof(prefix) - have,
                                         net::Clock::now() + timeout_, &error);
  if (status == net::IoStatus::kClosed) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " sent a truncated message during " << what
                                 << " (the connection closed inside a frame header)");
  }
  if (status != net::IoStatus::kOk) fail(status, error, what);
  if (std::memcmp(prefix, kFrameMagic, 4) != 0) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " sent something that is not a ringd parameter-server message "
                                 << "(magic " << hex_magic(prefix) << ") during " << what
                                 << " — is that port a ringd ps server/worker of this version?");
  }
  const uint32_t version = read_u32(prefix + 4);
  const uint32_t header_bytes = read_u32(prefix + 8);
  if (version != kFrameVersion) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " speaks parameter-server protocol v" << version
                                 << ", this is v" << kFrameVersion << " (mixed ringd versions?)");
  }
  if (header_bytes > kMaxHeaderBytes || read_u32(prefix + 12) != 0) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " sent a malformed frame during " << what << " (header of "
                                 << header_bytes << " bytes, limit " << kMaxHeaderBytes << ")");
  }
  std::string encoded(header_bytes, '\0');
  status = net::recv_exact(socket_.get(), encoded.data(), encoded.size(),
                           net::Clock::now() + timeout_, &error);
  if (status == net::IoStatus::kClosed) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " sent a truncated message during " << what << " (closed after "
                                 << "the prefix, before the " << header_bytes << "-byte header)");
  }
  if (status != net::IoStatus::kOk) fail(status, error, what);
  if (!header->ParseFromString(encoded)) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " sent an undecodable message header during " << what);
  }
  pending_payload_ = header->payload_bytes();
  return true;
}

void Connection::expect_payload(uint64_t bytes, const std::string& what) {
  if (pending_payload_ != bytes) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " announced " << pending_payload_ << " payload bytes for "
                                 << what << ", expected " << bytes
                                 << " (a peer of another model or another ringd?)");
  }
}

void Connection::receive_payload(void* into, size_t bytes, const std::string& what) {
  check_readable(what);
  if (bytes > pending_payload_) expect_payload(bytes, what);
  int error = 0;
  const net::IoStatus status =
      net::recv_exact_idle(socket_.get(), into, bytes, timeout_, &error);  // silence, as in send
  if (status == net::IoStatus::kClosed) {
    broken_ = true;
    RINGD_THROW(kProtocol, peer_ << " sent a truncated message during " << what
                                 << " (the connection closed inside a " << bytes
                                 << "-byte payload)");
  }
  if (status != net::IoStatus::kOk) fail(status, error, what);
  pending_payload_ -= bytes;
}

void Connection::skip_payload(size_t bytes, const std::string& what) {
  std::vector<uint8_t> sink(std::min<size_t>(bytes, 1 << 20));
  size_t left = bytes;
  while (left > 0) {
    const size_t piece = std::min(left, sink.size());
    receive_payload(sink.data(), piece, what);
    left -= piece;
  }
}

std::string Connection::error_left_by_peer(int* code) {
  // The peer may have written an ERROR and closed before our send failed: it is in our receive
  // buffer. Give it a moment to arrive; anything that is not a whole ERROR frame is ignored.
  const net::Deadline deadline = net::Clock::now() + std::chrono::milliseconds(1000);
  uint8_t prefix[kFramePrefixBytes];
  int error = 0;
  if (net::recv_exact(socket_.get(), prefix, sizeof(prefix), deadline, &error) !=
          net::IoStatus::kOk ||
      std::memcmp(prefix, kFrameMagic, 4) != 0 || read_u32(prefix + 8) > kMaxHeaderBytes) {
    return "";
  }
  std::string encoded(read_u32(prefix + 8), '\0');
  ps::Header header;
  if (net::recv_exact(socket_.get(), encoded.data(), encoded.size(), deadline, &error) !=
          net::IoStatus::kOk ||
      !header.ParseFromString(encoded) || header.type() != ps::ERROR) {
    return "";
  }
  *code = static_cast<int>(header.error_code());
  return header.error();
}

ps::Header error_header(int code, const std::string& message) {
  ps::Header header;
  header.set_type(ps::ERROR);
  header.set_error(message);
  header.set_error_code(static_cast<uint32_t>(code));
  return header;
}

void throw_remote_error(const std::string& peer, uint32_t code, const std::string& message) {
  const ErrorCode error_code = code <= static_cast<uint32_t>(ErrorCode::kDeadlock)
                                   ? static_cast<ErrorCode>(code)
                                   : ErrorCode::kProtocol;
  throw RemoteError(error_code,
                    message.find(peer) == std::string::npos ? peer + ": " + message : message);
}

}  // namespace ringd::ps
