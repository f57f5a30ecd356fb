// The acceptor's side of the handshake (see handshake.h): a non-blocking state machine the I/O
// loop advances whenever the socket is readable, so a slow or hostile dialer never blocks anyone.
#include <errno.h>
#include <sys/socket.h>

#include "net/handshake.h"
#include "net/handshake_codec.h"

namespace ringd::net {
namespace {

enum class ReadResult { kIncomplete, kComplete, kClosed };

// Reads up to `want` bytes; kClosed on EOF or error (with *error set).
ReadResult read_some(int fd, uint8_t* into, size_t want, size_t* got, int* error) {
  while (*got < want) {
    const ssize_t n = ::recv(fd, into + *got, want - *got, MSG_DONTWAIT);
    if (n > 0) {
      *got += static_cast<size_t>(n);
    } else if (n == 0) {
      *error = 0;
      return ReadResult::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return ReadResult::kIncomplete;
    } else if (errno != EINTR) {
      *error = errno;
      return ReadResult::kClosed;
    }
  }
  return ReadResult::kComplete;
}

bool send_now(int fd, const std::vector<uint8_t>& message) {
  return send_immediately(fd, message.data(), message.size());
}

std::string claimed(const HelloInfo& hello) {
  if (hello.kind == PeerKind::kStoreClient) return "a TCP store client";
  if (hello.kind == PeerKind::kConflictNotice) {
    return "a notice that rank " + std::to_string(hello.rank) + " was claimed twice, from " +
           hello.address;
  }
  if (hello.kind == PeerKind::kPsWorker) {
    return "parameter-server worker " + std::to_string(hello.rank) + " of " +
           std::to_string(hello.world_size) + (hello.address.empty() ? "" : " at " + hello.address);
  }
  return "rank " + std::to_string(hello.rank) + " of " + std::to_string(hello.world_size) +
         (hello.address.empty() ? "" : " at " + hello.address);
}

}  // namespace

AcceptHandshake::AcceptHandshake(std::string secret, int32_t acceptor_rank, Admit admit)
    : secret_(std::move(secret)), acceptor_rank_(acceptor_rank), admit_(std::move(admit)) {}

bool AcceptHandshake::read_message(int fd) {
  int error = 0;
  ReadResult result = ReadResult::kComplete;
  if (header_got_ < kHandshakeHeaderBytes) {
    result = read_some(fd, header_, kHandshakeHeaderBytes, &header_got_, &error);
    if (result == ReadResult::kComplete) {
      codec::ParsedHeader parsed;
      const std::string problem = codec::parse_header(header_, &parsed);
      if (!problem.empty()) {
        reject(HandshakeStatus::kProtocol, ErrorCode::kProtocol, problem);
        return false;
      }
      const uint32_t expected =
          static_cast<uint32_t>(hello_done_ ? HandshakeType::kProof : HandshakeType::kHello);
      if (parsed.type != expected) {
        reject(HandshakeStatus::kProtocol, ErrorCode::kProtocol,
               "unexpected handshake message type " + std::to_string(parsed.type) + " (expected " +
                   std::to_string(expected) + ")");
        return false;
      }
      body_.assign(parsed.body_bytes, 0);
      body_got_ = 0;
    }
  }
  if (result == ReadResult::kComplete) {
    result = read_some(fd, body_.data(), body_.size(), &body_got_, &error);
  }
  if (result == ReadResult::kClosed) {
    state_ = State::kRejected;
    reject_code_ = ErrorCode::kPeerLost;
    reject_reason_ = "connection " + io_status_text(IoStatus::kClosed, error) +
                     " during the handshake" +
                     (hello_done_ ? " (after the hello of " + claimed(hello_) + ")" : "");
    return false;
  }
  return result == ReadResult::kComplete;
}

AcceptHandshake::State AcceptHandshake::advance(int fd) {
  while (state_ == State::kInProgress && read_message(fd)) {
    header_got_ = 0;
    state_ = hello_done_ ? on_proof(fd) : on_hello(fd);
  }
  return state_;
}

AcceptHandshake::State AcceptHandshake::on_hello(int fd) {
  if (!codec::decode_hello(body_, &hello_)) {
    return reject(HandshakeStatus::kProtocol, ErrorCode::kProtocol, "malformed hello");
  }
  hello_body_ = body_;
  hello_done_ = true;
  random_bytes(acceptor_nonce_, sizeof(acceptor_nonce_));
  const Sha256Digest proof =
      codec::proof(secret_, "ringd acceptor", hello_body_, acceptor_rank_, acceptor_nonce_);
  codec::Writer challenge;
  challenge.i32(acceptor_rank_);
  challenge.raw(acceptor_nonce_, sizeof(acceptor_nonce_));
  challenge.raw(proof.data(), proof.size());
  if (!send_now(fd, codec::encode_message(HandshakeType::kChallenge, challenge.bytes()))) {
    state_ = State::kRejected;
    reject_code_ = ErrorCode::kPeerLost;
    reject_reason_ = "could not send the challenge to " + claimed(hello_);
  }
  return state_;
}

AcceptHandshake::State AcceptHandshake::on_proof(int fd) {
  const Sha256Digest expected =
      codec::proof(secret_, "ringd dialer", hello_body_, acceptor_rank_, acceptor_nonce_);
  if (body_.size() != expected.size() || !digest_equal(expected.data(), body_.data(), 32)) {
    return reject(HandshakeStatus::kAuth, ErrorCode::kAuth,
                  "wrong job secret (HMAC proof mismatch) from " + claimed(hello_));
  }
  const std::string refusal = admit_(hello_);
  if (!refusal.empty()) {
    return reject(HandshakeStatus::kRefused, ErrorCode::kMismatch,
                  refusal + " (from " + claimed(hello_) + ")");
  }
  if (!send_now(fd, codec::encode_message(HandshakeType::kResult,
                                          codec::encode_result(HandshakeStatus::kAccepted, "")))) {
    state_ = State::kRejected;
    reject_code_ = ErrorCode::kPeerLost;
    reject_reason_ = "could not send the result to " + claimed(hello_);
    return state_;
  }
  state_ = State::kAdmitted;
  return state_;
}

AcceptHandshake::State AcceptHandshake::reject(HandshakeStatus status, ErrorCode code,
                                               const std::string& reason) {
  reject_reply_ =
      codec::encode_message(HandshakeType::kResult, codec::encode_result(status, reason));
  state_ = State::kRejected;
  reject_code_ = code;
  reject_reason_ = reason;
  return state_;
}

}  // namespace ringd::net
