// The handshake that opens every ringd TCP connection (rank-to-rank pairs and TCP store clients),
// and the wire format that follows it. All integers are little-endian.
//
// Handshake messages: a 16-byte header, then `body_bytes` (at most kMaxHandshakeBody) of body.
//
//   0        4          8       12           16
//   +--------+----------+-------+------------+---------------
//   | "RNGD" | version  | type  | body_bytes | body ...
//   +--------+----------+-------+------------+---------------
//
// Sequence (the dialer connect()s, the acceptor accept()s; K = the job secret):
//
//   dialer                                                   acceptor
//     | HELLO     kind u32 (1 pair, 2 store client, 3 ps worker,       |
//     |           4 conflict notice), dialer rank i32, target rank i32,|
//     |           world size i32, Nd u8[16], job id u8[16] (zeros: no  |
//     |           job yet), address length u16, dialer's "host:port"   |
//     |------------------------------------------------------------->| check magic, version,
//     |                                                               | kind, body
//     | CHALLENGE acceptor rank i32, Na u8[16], Ma u8[32]             |
//     |<-------------------------------------------------------------|
//     | check Ma, acceptor rank                                       |
//     | PROOF     Md u8[32]                                           |
//     |------------------------------------------------------------->| check Md, then admit()
//     | RESULT    status u32 (0 accepted, 1 protocol, 2 auth,         | (rank expected? size?
//     |           3 refused), reason length u16, reason text          |  duplicate?)
//     |<-------------------------------------------------------------|
//
//   Ma = HMAC-SHA256(K, "ringd acceptor" || version u32 || HELLO body || acceptor rank || Na)
//   Md = HMAC-SHA256(K, "ringd dialer"   || version u32 || HELLO body || acceptor rank || Na)
//
// Nd and Na are 16 fresh random bytes per connection, so a proof is bound to this connection and
// this direction and cannot be replayed or reflected; K never crosses the wire. A RESULT with a
// non-zero status may replace the CHALLENGE (foreign version, malformed HELLO). A peer whose header
// has another version is reported as "peer speaks ringd protocol vX, this is vY". The acceptor runs
// its side asynchronously in the I/O loop with a deadline of kHandshakeTimeout; anything that fails
// is logged ("rejected connection from a.b.c.d:port: <reason>") and closed.
//
// Job identity (v2): a pair's HELLO carries the id of the job the dialer joined (16 random bytes
// chosen by the first rank to reach the rendezvous store, rendezvous/job_membership.h); a rank
// refuses a HELLO of another job. A conflict notice (kind 4) is sent by a process whose claim of
// rank `dialer rank` was refused, to every rank of the job: the rank that accepts it fails its
// context, naming both claimants (the address field carries the refused claimant's description).
//
// After an accepted RESULT, a pair carries data messages in both directions (see pair.h):
//
//   +-----------------------+-----------+---------+---------------+----------------
//   | magic/version u32     | flags u32 | tag u64 | bytes u64     | payload ...
//   | 0x52440000 | version  | (0)       |         |               | (bytes long)
//   +-----------------------+-----------+---------+---------------+----------------
//
// and a TCP store connection carries requests and responses (see rendezvous/tcp_store.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "net/socket.h"
#include "ringd/error.h"

namespace ringd::net {

constexpr uint32_t kProtocolVersion = 2;  // 2: the HELLO carries the job id
constexpr char kHandshakeMagic[4] = {'R', 'N', 'G', 'D'};
constexpr size_t kHandshakeHeaderBytes = 16;
constexpr size_t kMaxHandshakeBody = 1024;
constexpr size_t kNonceBytes = 16;
constexpr size_t kJobIdBytes = 16;  // on the wire; 32 hex digits in HelloInfo and messages
constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

enum class HandshakeType : uint32_t { kHello = 1, kChallenge = 2, kProof = 3, kResult = 4 };
// kPsWorker: a parameter-server worker calling a server (src/ps/), rank = the worker's rank.
// kConflictNotice: rank `rank` was claimed twice; sent by the refused claimant (see above).
enum class PeerKind : uint32_t { kPair = 1, kStoreClient = 2, kPsWorker = 3, kConflictNotice = 4 };
enum class HandshakeStatus : uint32_t { kAccepted = 0, kProtocol = 1, kAuth = 2, kRefused = 3 };

struct HelloInfo {
  PeerKind kind = PeerKind::kPair;
  int32_t rank = -1;         // the dialer's rank (-1 for store clients)
  int32_t target_rank = -1;  // the rank the dialer believes it is calling (-1: the store)
  int32_t world_size = 0;
  std::string job_id;   // 32 lowercase hex digits, or "" (store clients, ps workers)
  std::string address;  // the dialer's advertised "host:port" (for error messages)
};

// The job secret to use: `explicit_secret`, else tunables().job_secret. When both are empty, logs
// (once per process) that the job is unauthenticated and returns "".
std::string resolve_secret(const std::string& explicit_secret);

// Encodes a handshake header; exposed so tests can speak a foreign version.
std::vector<uint8_t> encode_handshake_header(HandshakeType type, uint32_t body_bytes,
                                             uint32_t version = kProtocolVersion);

// The dialer's side, on a connected non-blocking socket, waiting in poll() until `deadline`.
// `self` names this side ("rank 3", "TCP store client") and `peer` the acceptor ("peer rank 0
// (10.0.0.1:4000)"), for messages. `expected_acceptor_rank` < 0 accepts any. Throws ringd::Error:
//   kAuth      the secrets differ (either side's proof failed)
//   kProtocol  the peer is not ringd or speaks another protocol version
//   kMismatch  the acceptor refused us (unexpected rank, world size, duplicate) or is another rank
//   kPeerLost  the connection dropped mid-handshake (worth retrying)
//   kTimeout   `deadline` passed
void dial_handshake(int fd, const std::string& secret, const HelloInfo& hello,
                    int expected_acceptor_rank, const std::string& self, const std::string& peer,
                    Deadline deadline);

// connect_to() + dial_handshake(), retrying refused connections and handshakes that dropped
// (kPeerLost) with exponential back-off (10 ms .. 1 s) until `deadline`; other handshake errors are
// final and thrown. Returns an invalid Fd when the deadline passed, with the last error in
// `last_error` and the number of attempts in `attempts`, so the caller can word the timeout.
Fd dial_with_retry(const Endpoint& endpoint, const SocketTuning& tuning, const std::string& secret,
                   const HelloInfo& hello, int expected_acceptor_rank, const std::string& self,
                   const std::string& peer, Deadline deadline, std::string* last_error,
                   int* attempts);

// The acceptor's side as a non-blocking state machine driven by the I/O loop.
class AcceptHandshake {
 public:
  // Called once the dialer has proven the secret: "" admits it, anything else is the reason
  // for refusing (sent to the dialer and logged).
  using Admit = std::function<std::string(const HelloInfo&)>;
  enum class State { kInProgress, kAdmitted, kRejected };

  AcceptHandshake(std::string secret, int32_t acceptor_rank, Admit admit);
  // Reads what `fd` has, answers, and returns the new state. Never blocks.
  State advance(int fd);
  State state() const { return state_; }
  // Whether a valid HELLO arrived (hello() is meaningful).
  bool hello_received() const { return hello_done_; }
  const HelloInfo& hello() const { return hello_; }
  // Why the connection was rejected, and how (kAuth, kProtocol, kMismatch or kPeerLost).
  const std::string& reject_reason() const { return reject_reason_; }
  ErrorCode reject_code() const { return reject_code_; }
  // The RESULT to send the rejected dialer (empty when the connection is already gone).
  const std::vector<uint8_t>& reject_reply() const { return reject_reply_; }

 private:
  bool read_message(int fd);  // true once header_ + body_ hold one whole message
  State on_hello(int fd);
  State on_proof(int fd);
  // Records the rejection; the Acceptor logs it, then sends reject_reply() (logs precede replies).
  State reject(HandshakeStatus status, ErrorCode code, const std::string& reason);

  const std::string secret_;
  const int32_t acceptor_rank_;
  Admit admit_;
  State state_ = State::kInProgress;
  bool hello_done_ = false;
  uint8_t header_[kHandshakeHeaderBytes] = {};
  size_t header_got_ = 0;
  std::vector<uint8_t> body_;
  size_t body_got_ = 0;
  std::vector<uint8_t> hello_body_;
  uint8_t acceptor_nonce_[kNonceBytes] = {};
  HelloInfo hello_;
  std::string reject_reason_;
  ErrorCode reject_code_ = ErrorCode::kProtocol;
  std::vector<uint8_t> reject_reply_;
};

}  // namespace ringd::net
