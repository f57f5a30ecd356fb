// One connection of the parameter-server protocol, worker <-> server, after the job-secret
// handshake (net/handshake.h, PeerKind::kPsWorker). Every message is one frame:
//
//   0        4          8              12         16
//   +--------+----------+--------------+----------+-------------------+---------------------
//   | "RNPS" | version  | header_bytes | 0        | Header (protobuf) | payload: float32 ...
//   +--------+----------+--------------+----------+-------------------+---------------------
//                                                   (header_bytes)      (Header.payload_bytes)
//
// Little-endian. The receiver checks the magic, the version, the header size limit and that the
// payload is exactly what it expects (the tensor's element count x 4) before reading it, and reads
// the payload straight into the destination buffer. Everything waits in poll(): the next frame
// without a deadline but interruptible (a server idles until a worker has something), the rest of
// a frame and every reply with the connection's timeout — for payloads, on silence: it starts
// again whenever bytes move, so a long transfer over a shared link is not cut off.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/socket.h"
#include "proto/ps.pb.h"
#include "ringd/error.h"

namespace ringd::ps {

constexpr char kFrameMagic[4] = {'R', 'N', 'P', 'S'};
constexpr uint32_t kFrameVersion = 2;  // 2: WAITING
constexpr size_t kFramePrefixBytes = 16;
constexpr uint32_t kMaxHeaderBytes = 4 << 20;

struct PayloadPart {
  const void* data;
  size_t bytes;
};

class Connection {
 public:
  // `peer` names the other side in every error ("parameter server 1 (10.0.0.2:7000)").
  Connection(net::Fd socket, std::string peer, std::chrono::milliseconds timeout);

  const std::string& peer() const { return peer_; }
  int fd() const { return socket_.get(); }
  bool open() const { return socket_.valid(); }
  void close() { socket_.reset(); }

  // Sends header (payload_bytes filled in) and the parts back to back. Throws kPeerLost or
  // kTimeout naming the peer and `what` ("push of fc1/weight step 3").
  void send(ps::Header header, const std::vector<PayloadPart>& parts, const std::string& what);

  // One header-only frame (an ERROR on the way out), only if the socket takes all of it at once:
  // never blocks. Returns whether it went.
  bool send_if_room(const ps::Header& header);

  // Waits for the next frame's header. Returns false when `stop_fd` (an eventfd, -1 = none) became
  // readable first, or when the peer closed the connection cleanly between frames and
  // `closed_ok` is set (*closed then says so). `wait_forever`: no deadline for the first byte.
  // Throws kProtocol for a foreign, truncated or oversized frame, kPeerLost, kTimeout.
  bool receive_header(ps::Header* header, bool wait_forever, int stop_fd, bool* closed,
                      const std::string& what);

  // Checks that the last header announced exactly `bytes` of payload (else kProtocol naming
  // `what` and both sizes: a foreign or confused peer), before anything is read into a buffer.
  void expect_payload(uint64_t bytes, const std::string& what);
  // The next `bytes` of that payload, straight into `into`.
  void receive_payload(void* into, size_t bytes, const std::string& what);
  // Reads and drops `bytes` of payload.
  void skip_payload(size_t bytes, const std::string& what);

 private:
  [[noreturn]] void fail(net::IoStatus status, int error, const std::string& what);
  void check_readable(const std::string& what) const;
  // After a failed send: an ERROR frame the peer sent before closing (it says why), or "".
  std::string error_left_by_peer(int* code);

  net::Fd socket_;
  std::string peer_;
  std::chrono::milliseconds timeout_;
  uint64_t pending_payload_ = 0;  // announced by the last header, not yet read
  // A malformed frame arrived: nothing more can be read in step, but an ERROR can still be sent.
  bool broken_ = false;
};

// An error the peer reported in an ERROR frame (its own words), as opposed to one this side saw
// on the connection. When several servers fail in one step, the worker reports one it saw itself
// (a server that died) before one a server relayed (another worker that was lost because of it).
class RemoteError : public Error {
 public:
  using Error::Error;
};

// The ERROR header a server sends before closing a connection (and that workers turn into a
// ringd::Error of `code`).
ps::Header error_header(int code, const std::string& message);

// What `peer` said in an ERROR frame as an exception: its code (kProtocol when unknown) and its
// words, after the peer's name unless they already contain it (a server names itself by address,
// the worker by its index in the job).
[[noreturn]] void throw_remote_error(const std::string& peer, uint32_t code,
                                     const std::string& message);

}  // namespace ringd::ps
