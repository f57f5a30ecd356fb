// The dialer's side of the handshake (see handshake.h), plus the pieces both sides share.
#include "net/handshake.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/handshake_codec.h"

namespace ringd::net {

std::string resolve_secret(const std::string& explicit_secret) {
  if (!explicit_secret.empty()) return explicit_secret;
  const std::string& secret = tunables().job_secret;
  if (secret.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      RINGD_LOG(kWarn) << "tcp: no job secret set (RINGD_JOB_SECRET / RINGD_JOB_SECRET_FILE): "
                          "connections are unauthenticated; anyone who can reach the ports can "
                          "join the job. The handshake still checks the protocol version.";
    });
  }
  return secret;
}

std::vector<uint8_t> encode_handshake_header(HandshakeType type, uint32_t body_bytes,
                                             uint32_t version) {
  codec::Writer writer;
  writer.raw(kHandshakeMagic, 4);
  writer.u32(version);
  writer.u32(static_cast<uint32_t>(type));
  writer.u32(body_bytes);
  return std::move(writer.bytes());
}

namespace {

struct DialContext {
  int fd;
  const std::string& self;
  const std::string& peer;
  Deadline deadline;
};

[[noreturn]] void throw_io(const DialContext& dial, IoStatus status, int error, const char* step) {
  if (status == IoStatus::kTimeout) {
    RINGD_THROW(kTimeout,
                dial.self << ": handshake with " << dial.peer << " timed out while " << step);
  }
  RINGD_THROW(kPeerLost, dial.self << ": handshake with " << dial.peer << " failed while " << step
                                   << ": " << io_status_text(status, error));
}

void send_message(const DialContext& dial, HandshakeType type, const std::vector<uint8_t>& body,
                  const char* step) {
  const std::vector<uint8_t> message = codec::encode_message(type, body);
  int error = 0;
  const IoStatus status = send_all(dial.fd, message.data(), message.size(), dial.deadline, &error);
  if (status != IoStatus::kOk) throw_io(dial, status, error, step);
}

[[noreturn]] void throw_result(const DialContext& dial, const std::vector<uint8_t>& body) {
  codec::Reader reader(body.data(), body.size());
  const uint32_t status = reader.u32();
  const std::string reason = reader.text(reader.u16());
  const std::string what = dial.self + ": " + dial.peer + " rejected the connection: " + reason;
  switch (static_cast<HandshakeStatus>(status)) {
    case HandshakeStatus::kAuth:
      RINGD_THROW(kAuth, what << " — every rank must use the same job secret "
                                 "(RINGD_JOB_SECRET / RINGD_JOB_SECRET_FILE)");
    case HandshakeStatus::kRefused: RINGD_THROW(kMismatch, what);
    default: RINGD_THROW(kProtocol, what);
  }
}

// Reads one handshake message; a RESULT with a failure status is thrown. Returns the body.
std::vector<uint8_t> receive_message(const DialContext& dial, HandshakeType expected,
                                     const char* step) {
  uint8_t header[kHandshakeHeaderBytes];
  int error = 0;
  IoStatus status = recv_exact(dial.fd, header, sizeof(header), dial.deadline, &error);
  if (status != IoStatus::kOk) throw_io(dial, status, error, step);
  codec::ParsedHeader parsed;
  const std::string problem = codec::parse_header(header, &parsed);
  if (!problem.empty()) RINGD_THROW(kProtocol, dial.self << ": " << dial.peer << ": " << problem);
  std::vector<uint8_t> body(parsed.body_bytes);
  status = recv_exact(dial.fd, body.data(), body.size(), dial.deadline, &error);
  if (status != IoStatus::kOk) throw_io(dial, status, error, step);
  if (parsed.type == static_cast<uint32_t>(HandshakeType::kResult)) {
    codec::Reader reader(body.data(), body.size());
    if (reader.u32() != static_cast<uint32_t>(HandshakeStatus::kAccepted)) throw_result(dial, body);
  }
  if (parsed.type != static_cast<uint32_t>(expected)) {
    RINGD_THROW(kProtocol, dial.self << ": " << dial.peer << " sent handshake message type "
                                     << parsed.type << " while " << step);
  }
  return body;
}

}  // namespace

void dial_handshake(int fd, const std::string& secret, const HelloInfo& hello,
                    int expected_acceptor_rank, const std::string& self, const std::string& peer,
                    Deadline deadline) {
  const DialContext dial{fd, self, peer, deadline};
  uint8_t dialer_nonce[kNonceBytes];
  random_bytes(dialer_nonce, sizeof(dialer_nonce));
  const std::vector<uint8_t> hello_body = codec::encode_hello(hello, dialer_nonce);
  send_message(dial, HandshakeType::kHello, hello_body, "sending its hello");

  const std::vector<uint8_t> challenge =
      receive_message(dial, HandshakeType::kChallenge, "waiting for the challenge");
  codec::Reader reader(challenge.data(), challenge.size());
  const int32_t acceptor_rank = reader.i32();
  uint8_t acceptor_nonce[kNonceBytes];
  uint8_t acceptor_proof[32];
  reader.raw(acceptor_nonce, sizeof(acceptor_nonce));
  reader.raw(acceptor_proof, sizeof(acceptor_proof));
  if (!reader.at_end())
    RINGD_THROW(kProtocol, self << ": " << peer << " sent a malformed challenge");
  if (expected_acceptor_rank >= 0 && acceptor_rank != expected_acceptor_rank) {
    RINGD_THROW(kMismatch, self << ": the address of " << peer << " is served by rank "
                                << acceptor_rank << " (stale rendezvous data from another job?)");
  }
  const Sha256Digest expected_proof =
      codec::proof(secret, "ringd acceptor", hello_body, acceptor_rank, acceptor_nonce);
  const bool acceptor_knows_secret = digest_equal(expected_proof.data(), acceptor_proof, 32);

  // Send our proof even when theirs failed, so the acceptor logs the rejection as well.
  const Sha256Digest our_proof =
      codec::proof(secret, "ringd dialer", hello_body, acceptor_rank, acceptor_nonce);
  codec::Writer proof_body;
  proof_body.raw(our_proof.data(), our_proof.size());
  send_message(dial, HandshakeType::kProof, proof_body.bytes(), "sending its proof");
  if (!acceptor_knows_secret) {
    // Wait briefly for the acceptor's verdict on our proof (it logs the rejection first), but
    // report our own finding.
    try {
      const DialContext brief{fd, self, peer, std::min(deadline, Clock::now() + kHandshakeTimeout)};
      receive_message(brief, HandshakeType::kResult, "waiting for the result");
    } catch (const Error&) {
    }
    RINGD_THROW(kAuth, self << ": " << peer << " failed the job-secret handshake (its HMAC proof "
                            << "does not match this rank's secret) — every rank must use the same "
                               "RINGD_JOB_SECRET / RINGD_JOB_SECRET_FILE");
  }
  receive_message(dial, HandshakeType::kResult, "waiting for the result");
}

Fd dial_with_retry(const Endpoint& endpoint, const SocketTuning& tuning, const std::string& secret,
                   const HelloInfo& hello, int expected_acceptor_rank, const std::string& self,
                   const std::string& peer, Deadline deadline, std::string* last_error,
                   int* attempts) {
  auto backoff = std::chrono::milliseconds(10);
  for (*attempts = 1;; ++*attempts) {
    int error = 0;
    Fd socket = connect_to(endpoint, tuning, deadline, &error);
    if (socket.valid()) {
      try {
        dial_handshake(socket.get(), secret, hello, expected_acceptor_rank, self, peer, deadline);
        return socket;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kPeerLost) throw;
        *last_error = e.what();
      }
    } else {
      *last_error = "connect: " + errno_text(error);
    }
    if (Clock::now() + backoff >= deadline) return Fd();
    RINGD_LOG(kDebug) << self << ": connecting to " << peer << " failed (" << *last_error
                      << "), retrying in " << backoff.count() << " ms";
    std::this_thread::sleep_for(backoff);  // retry back-off, not synchronisation
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace ringd::net
