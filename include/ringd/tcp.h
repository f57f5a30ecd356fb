// The tcp transport: one TCP connection per pair of ranks, served by one epoll I/O thread per
// process. Sends are writev() straight from the caller's buffer; receives read straight into the
// destination buffer. Every connection starts with a versioned challenge-response handshake on the
// job secret (HMAC-SHA256; the secret never crosses the wire). The listening socket stays open for
// the whole job: connections that fail the handshake (wrong secret, foreign protocol, garbage) are
// logged and closed without disturbing the job.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ringd/store.h"  // the stores (TcpStoreServer, TcpStore, FileStore)
#include "ringd/transport.h"

namespace ringd {

struct TcpOptions {
  // Address to listen on; also the address published to peers unless advertise_address is set.
  // Empty = the address of `interface`, or of this host's name, or 127.0.0.1.
  std::string bind_address;
  std::string advertise_address;
  std::string interface;  // e.g. "eth0": listen on and advertise this interface's IPv4 address;
                          // empty = RINGD_IFACE
  uint16_t port = 0;      // 0 = any free port
  std::string secret;  // empty = tunables().job_secret (empty there too = unauthenticated, warned)
  // The job this rank belongs to, when its launcher agreed on one (32 hex digits): the rendezvous
  // store must hold this id. Empty = the store's job, whoever created it.
  std::string job_id;
  // Where job_id came from ("torchrun run 5c1f", "RINGD_JOB_ID=train-7"): recorded in the store
  // with the id, so that a process of another job is told which two jobs met.
  std::string job_source;
  std::chrono::milliseconds timeout{0};  // 0 = tunables().timeout
  size_t socket_buffer_bytes = 0;        // 0 = tunables().socket_buffer_bytes
  // TCP congestion control of the pairs' sockets (e.g. "reno"; "system" = the kernel's default).
  // Empty = tunables().tcp_congestion (RINGD_TCP_CONGESTION). One the kernel refuses fails
  // tcp_connect with kInvalidArgument (ringd's unset default, reno, only warns).
  std::string tcp_congestion;
};

// Joins the store's job, claims rank `rank` in it (a rank claimed by another process is refused
// with kMismatch naming the holder, and every rank of the job is told), publishes this rank's
// address, connects to every peer (full mesh, each connection carrying the job id) and returns
// the context. Throws ringd::Error naming the peer that could not be reached or authenticated.
std::unique_ptr<Context> tcp_connect(Store& store, int rank, int size,
                                     const TcpOptions& options = {});

}  // namespace ringd
