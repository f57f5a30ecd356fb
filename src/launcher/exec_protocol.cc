#include "launcher/exec_protocol.h"

#include <cstring>

#include "ringd/error.h"

namespace ringd::launcher::exec {
namespace {

constexpr char kMagic[4] = {'R', 'G', 'X', '1'};
constexpr size_t kHelloBytes = 4 + 4 + kNonceBytes;
constexpr size_t kChallengeBytes = kHelloBytes + 32;
constexpr uint8_t kStatusAccepted = 0;
constexpr uint8_t kStatusWrongSecret = 1;

void send_or_throw(int fd, const void* data, size_t bytes, const std::string& peer,
                   const char* what, Deadline deadline) {
  int error = 0;
  const net::IoStatus status = net::send_all(fd, data, bytes, deadline, &error);
  if (status == net::IoStatus::kOk) return;
  if (status == net::IoStatus::kTimeout) {
    RINGD_THROW(kTimeout, "sending " << what << " to " << peer << ": timed out");
  }
  RINGD_THROW(kPeerLost,
              "sending " << what << " to " << peer << ": " << net::io_status_text(status, error));
}

void receive_or_throw(int fd, void* data, size_t bytes, const std::string& peer, const char* what,
                      Deadline deadline) {
  int error = 0;
  const net::IoStatus status = net::recv_exact(fd, data, bytes, deadline, &error);
  if (status == net::IoStatus::kOk) return;
  if (status == net::IoStatus::kTimeout) {
    RINGD_THROW(kTimeout, "waiting for " << what << " from " << peer << ": timed out");
  }
  RINGD_THROW(kPeerLost, "waiting for " << what << " from " << peer << ": "
                                        << net::io_status_text(status, error));
}

void put_header(uint8_t* out) {
  std::memcpy(out, kMagic, 4);
  const uint32_t version = kProtocolVersion;
  std::memcpy(out + 4, &version, 4);
}

void check_header(const uint8_t* in, const std::string& peer) {
  if (std::memcmp(in, kMagic, 4) != 0) {
    RINGD_THROW(kProtocol, peer << " is not a ringd exec service (wrong magic): is the port an "
                                   "agent's exec port (default 29400)?");
  }
  uint32_t version = 0;
  std::memcpy(&version, in + 4, 4);
  if (version != kProtocolVersion) {
    RINGD_THROW(kProtocol, peer << " speaks ringd exec protocol v" << version << ", this is v"
                                << kProtocolVersion << ": run the same ringd version everywhere");
  }
}

}  // namespace

Sha256Digest derive(const std::string& secret, const char* label, const uint8_t* client_nonce,
                    const uint8_t* server_nonce) {
  HmacSha256 mac(secret.data(), secret.size());
  mac.update(std::string_view(label));
  mac.update(client_nonce, kNonceBytes);
  mac.update(server_nonce, kNonceBytes);
  return mac.finish();
}

SessionKeys client_handshake(int fd, const std::string& secret, const std::string& peer,
                             Deadline deadline) {
  uint8_t hello[kHelloBytes];
  put_header(hello);
  net::random_bytes(hello + 8, kNonceBytes);
  send_or_throw(fd, hello, sizeof(hello), peer, "the exec handshake", deadline);

  uint8_t challenge[kChallengeBytes];
  receive_or_throw(fd, challenge, 8, peer, "the exec handshake's challenge", deadline);
  check_header(challenge, peer);
  receive_or_throw(fd, challenge + 8, sizeof(challenge) - 8, peer, "the exec handshake's challenge",
                   deadline);
  const uint8_t* client_nonce = hello + 8;
  const uint8_t* server_nonce = challenge + 8;
  const Sha256Digest expected = derive(secret, "ringd exec agent", client_nonce, server_nonce);
  if (!digest_equal(expected.data(), challenge + 8 + kNonceBytes, expected.size())) {
    // A proof that cannot be right, so the agent records (and logs) the mismatch too instead of
    // seeing a connection that merely closed.
    const uint8_t no_proof[32] = {};
    net::send_immediately(fd, no_proof, sizeof(no_proof));
    RINGD_THROW(kAuth, peer << " does not know this job's secret (its proof is wrong): give "
                               "every pod the same RINGD_JOB_SECRET / RINGD_JOB_SECRET_FILE");
  }
  const Sha256Digest proof = derive(secret, "ringd exec client", client_nonce, server_nonce);
  send_or_throw(fd, proof.data(), proof.size(), peer, "the exec handshake's proof", deadline);
  uint8_t status = 0;
  receive_or_throw(fd, &status, 1, peer, "the exec handshake's result", deadline);
  if (status != kStatusAccepted) {
    RINGD_THROW(kAuth, peer << " rejected this side's proof of the job secret");
  }
  return {derive(secret, "ringd exec key client->agent", client_nonce, server_nonce),
          derive(secret, "ringd exec key agent->client", client_nonce, server_nonce)};
}

ServerHandshake::ServerHandshake(const std::string& secret, std::string peer)
    : secret_(secret), peer_(std::move(peer)) {}

size_t ServerHandshake::wanted() const {
  switch (step_) {
    case Step::kHeader: return 8;
    case Step::kNonce: return kNonceBytes;
    case Step::kProof: return 32;
    case Step::kDone: break;
  }
  return 0;
}

void ServerHandshake::consume(const uint8_t* data, std::string* reply) {
  const auto append = [reply](const void* bytes, size_t count) {
    reply->append(static_cast<const char*>(bytes), count);
  };
  if (step_ == Step::kHeader) {
    // Answer a foreign version with our own header first, so the client can say which it met.
    uint8_t header[8];
    put_header(header);
    if (std::memcmp(data, kMagic, 4) == 0) append(header, sizeof(header));
    check_header(data, peer_);
    step_ = Step::kNonce;
  } else if (step_ == Step::kNonce) {
    std::memcpy(client_nonce_, data, kNonceBytes);
    net::random_bytes(server_nonce_, kNonceBytes);
    const Sha256Digest proof = derive(secret_, "ringd exec agent", client_nonce_, server_nonce_);
    append(server_nonce_, kNonceBytes);
    append(proof.data(), proof.size());
    step_ = Step::kProof;
  } else if (step_ == Step::kProof) {
    const Sha256Digest expected =
        derive(secret_, "ringd exec client", client_nonce_, server_nonce_);
    if (!digest_equal(expected.data(), data, expected.size())) {
      append(&kStatusWrongSecret, 1);
      RINGD_THROW(kAuth, peer_ << " does not know this job's secret (wrong proof)");
    }
    append(&kStatusAccepted, 1);
    keys_ = {derive(secret_, "ringd exec key agent->client", client_nonce_, server_nonce_),
             derive(secret_, "ringd exec key client->agent", client_nonce_, server_nonce_)};
    step_ = Step::kDone;
  }
}

SessionKeys server_handshake(int fd, const std::string& secret, const std::string& peer,
                             Deadline deadline) {
  ServerHandshake handshake(secret, peer);
  while (!handshake.done()) {
    uint8_t input[32];
    receive_or_throw(fd, input, handshake.wanted(), peer, "the exec handshake", deadline);
    std::string reply;
    try {
      handshake.consume(input, &reply);
    } catch (const Error&) {
      // Best effort: a client that already found our proof wrong has gone away.
      net::send_immediately(fd, reply.data(), reply.size());
      throw;
    }
    send_or_throw(fd, reply.data(), reply.size(), peer, "the exec handshake's reply", deadline);
  }
  return handshake.keys();
}

std::string Channel::encode(MessageType type, std::string_view payload) {
  if (payload.size() > kMaxPayloadBytes) {
    RINGD_THROW(kInternal,
                "exec frame of " << payload.size() << " bytes exceeds " << kMaxPayloadBytes);
  }
  std::string frame(kFrameHeaderBytes, '\0');
  frame[0] = static_cast<char>(type);
  const uint32_t bytes = static_cast<uint32_t>(payload.size());
  std::memcpy(&frame[4], &bytes, 4);
  const uint64_t sequence = send_sequence_++;
  std::memcpy(&frame[8], &sequence, 8);
  frame.append(payload.data(), payload.size());
  HmacSha256 mac(keys_.send.data(), keys_.send.size());
  mac.update(frame.data(), frame.size());
  const Sha256Digest digest = mac.finish();
  frame.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return frame;
}

void Channel::send(MessageType type, std::string_view payload, Deadline deadline) {
  const std::string frame = encode(type, payload);
  send_or_throw(fd_, frame.data(), frame.size(), peer_, "an exec message", deadline);
}

bool Channel::receive(MessageType* type, std::string* payload, Deadline deadline) {
  uint8_t header[kFrameHeaderBytes];
  int error = 0;
  // The first byte alone: a close here is the end of the conversation, not a failure.
  const net::IoStatus first = net::recv_exact(fd_, header, 1, deadline, &error);
  if (first == net::IoStatus::kClosed) return false;
  if (first != net::IoStatus::kOk) {
    if (first == net::IoStatus::kTimeout) {
      RINGD_THROW(kTimeout, "waiting for an exec message from " << peer_ << ": timed out");
    }
    RINGD_THROW(kPeerLost, "reading from " << peer_ << ": " << net::io_status_text(first, error));
  }
  receive_or_throw(fd_, header + 1, sizeof(header) - 1, peer_, "an exec message", deadline);
  uint32_t bytes = 0;
  uint64_t sequence = 0;
  std::memcpy(&bytes, header + 4, 4);
  std::memcpy(&sequence, header + 8, 8);
  if (bytes > kMaxPayloadBytes || header[1] != 0 || header[2] != 0 || header[3] != 0) {
    RINGD_THROW(kProtocol,
                "malformed exec message from " << peer_ << " (payload " << bytes << " bytes)");
  }
  std::string body(bytes, '\0');
  if (bytes > 0) receive_or_throw(fd_, body.data(), bytes, peer_, "an exec message", deadline);
  uint8_t received_mac[32];
  receive_or_throw(fd_, received_mac, sizeof(received_mac), peer_, "an exec message", deadline);
  HmacSha256 mac(keys_.receive.data(), keys_.receive.size());
  mac.update(header, sizeof(header));
  mac.update(body.data(), body.size());
  const Sha256Digest expected = mac.finish();
  if (!digest_equal(expected.data(), received_mac, expected.size())) {
    RINGD_THROW(kAuth, "exec message " << sequence << " from " << peer_
                                       << " fails its MAC: altered in transit, or not from the "
                                          "peer that authenticated; connection dropped");
  }
  if (sequence != receive_sequence_) {
    RINGD_THROW(kAuth, "exec message from " << peer_ << " has sequence number " << sequence
                                            << ", expected " << receive_sequence_
                                            << ": replayed or reordered; connection dropped");
  }
  ++receive_sequence_;
  *type = static_cast<MessageType>(header[0]);
  *payload = std::move(body);
  return true;
}

}  // namespace ringd::launcher::exec
