// The wire protocol between `ringd exec` (client) and `ringd agent`'s exec service (server): a
// mutual challenge-response on the job secret K, then framed messages, each carrying a sequence
// number and an HMAC under a key that belongs to this connection and this direction.
//
//   client                                                        agent
//     | HELLO      "RGX1" version u32, Nc u8[16]                    |
//     |------------------------------------------------------------>|
//     | CHALLENGE  "RGX1" version u32, Ns u8[16],                   |
//     |            Ms = HMAC(K, "ringd exec agent" || Nc || Ns)     |
//     |<------------------------------------------------------------|
//     | check Ms (the agent knows K: the command goes to no impostor)
//     | PROOF      Mc = HMAC(K, "ringd exec client" || Nc || Ns)    |
//     |------------------------------------------------------------>| check Mc
//     | STATUS     u8 (0 accepted, 1 wrong secret)                  |
//     |<------------------------------------------------------------|
//     | frames, both ways:                                          |
//     |  +------+-------+-------------+---------+---------+------+  |
//     |  | type | 0 0 0 | payload u32 | seq u64 | payload | MAC  |  |
//     |  +------+-------+-------------+---------+---------+------+  |
//     |  MAC = HMAC(Kdir, the 16-byte header || payload)            |
//
//   Kc2s = HMAC(K, "ringd exec key client->agent" || Nc || Ns)
//   Ks2c = HMAC(K, "ringd exec key agent->client" || Nc || Ns)
//
// Nc and Ns are fresh random bytes, so proofs and keys differ on every connection: a recorded
// proof or frame is worthless on another connection. Within one, each direction numbers its frames
// 0, 1, 2...; a receiver accepts only the next number, so a frame replayed, dropped or reordered is
// rejected, and a changed byte fails the MAC (both kAuth). K never crosses the wire. Nothing is
// encrypted: commands and output are visible on the network, only their origin and integrity are
// protected (docs/launcher.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/sha256.h"
#include "net/socket.h"

namespace ringd::launcher::exec {

using net::Deadline;

constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kNonceBytes = 16;
constexpr size_t kFrameHeaderBytes = 16;
constexpr uint32_t kMaxPayloadBytes = 1 << 20;

enum class MessageType : uint8_t {
  // client -> agent
  kRun = 1,       // payload: the command line (ssh style: one string)
  kPing = 2,      // readiness probe; answered by kPong
  kStdin = 3,     // bytes for the child's stdin
  kStdinEof = 4,  // close the child's stdin
  // agent -> client
  kStarted = 16,  // payload: the child's pid (decimal)
  kRefused = 17,  // payload: why the command was not started
  kStdout = 18,
  kStderr = 19,
  kExit = 20,  // payload: "exit N" or "signal N"
  kPong = 21,  // payload: the agent's name (its pod)
};

struct SessionKeys {
  Sha256Digest send{};
  Sha256Digest receive{};
};

// Run the handshake on a connected non-blocking socket, waiting in poll() until `deadline`.
// Throw ringd::Error: kAuth (the other side proved another secret), kProtocol (not a ringd exec
// peer, or another version), kPeerLost (closed mid-handshake), kTimeout. `peer` names the other
// side in messages ("agent ringd-2.ringd... (10.0.0.3:29400)").
SessionKeys client_handshake(int fd, const std::string& secret, const std::string& peer,
                             Deadline deadline);
SessionKeys server_handshake(int fd, const std::string& secret, const std::string& peer,
                             Deadline deadline);

// The agent's half of the handshake as a state machine without I/O, so that one thread can carry
// many connections through it at once (exec_handshakes.h) and a silent client costs no thread.
// The caller reads exactly wanted() bytes, hands them to consume() and sends what it appended to
// `reply`; consume() throws (kProtocol, kAuth) after appending what the client should still get
// (our header for a foreign version, the wrong-secret status), so the caller sends `reply` best
// effort before giving up on the connection.
class ServerHandshake {
 public:
  // `secret` must outlive this object.
  ServerHandshake(const std::string& secret, std::string peer);
  size_t wanted() const;  // bytes the next step needs; 0 once done()
  bool done() const { return step_ == Step::kDone; }
  void consume(const uint8_t* data, std::string* reply);
  const SessionKeys& keys() const { return keys_; }  // once done()

 private:
  enum class Step { kHeader, kNonce, kProof, kDone };
  const std::string& secret_;
  std::string peer_;
  Step step_ = Step::kHeader;
  uint8_t client_nonce_[kNonceBytes] = {};
  uint8_t server_nonce_[kNonceBytes] = {};
  SessionKeys keys_;
};

// The key derivation and proofs, exposed for tests.
Sha256Digest derive(const std::string& secret, const char* label, const uint8_t* client_nonce,
                    const uint8_t* server_nonce);

// Framed, authenticated messages on one connection. Not thread-safe: one thread uses it.
class Channel {
 public:
  Channel(int fd, SessionKeys keys, std::string peer)
      : fd_(fd), keys_(keys), peer_(std::move(peer)) {}

  void send(MessageType type, std::string_view payload, Deadline deadline);
  // One whole frame. Returns false at a clean end of stream between frames. Throws kAuth (bad
  // MAC, replayed or reordered frame), kProtocol (malformed), kPeerLost, kTimeout.
  bool receive(MessageType* type, std::string* payload, Deadline deadline);

  // The encoded frame send() would write next (and counts it as sent); for tests.
  std::string encode(MessageType type, std::string_view payload);
  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }

 private:
  int fd_;
  SessionKeys keys_;
  std::string peer_;
  uint64_t send_sequence_ = 0;
  uint64_t receive_sequence_ = 0;
};

}  // namespace ringd::launcher::exec
