// tcp_connect(): listen, publish "host:port" under "tcp/<rank>", dial every lower rank (retrying
// with back-off until the timeout), wait for every higher rank to dial in, return the Context.
#include <thread>

#include "common/logging.h"
#include "common/tunables.h"
#include "ringd/error.h"
#include "ringd/tcp.h"
#include "transport/tcp/device.h"
#include "transport/tcp/handshake.h"

namespace ringd {
namespace {

tcp::ResolvedTcpOptions resolve(const TcpOptions& options) {
  tcp::ResolvedTcpOptions resolved;
  const std::string& interface =
      options.interface.empty() ? tunables().interface : options.interface;
  resolved.bind_host =
      options.bind_address.empty() ? tcp::default_host_address(interface) : options.bind_address;
  resolved.advertise_host = options.advertise_address;
  if (resolved.advertise_host.empty()) {
    resolved.advertise_host =
        resolved.bind_host == "0.0.0.0" ? tcp::default_host_address(interface) : resolved.bind_host;
  }
  resolved.port = options.port;
  resolved.secret = tcp::resolve_secret(options.secret);
  resolved.timeout = options.timeout.count() > 0 ? options.timeout : tunables().timeout;
  resolved.socket_buffer_bytes = options.socket_buffer_bytes > 0 ? options.socket_buffer_bytes
                                                                 : tunables().socket_buffer_bytes;
  return resolved;
}

std::string store_key(int rank) { return "tcp/" + std::to_string(rank); }

// Connects to `peer` and runs the handshake, retrying refused or dropped connections with
// exponential back-off (10 ms .. 1 s) until `deadline`. Authentication and protocol failures are
// final.
tcp::Fd dial_peer(const tcp::ResolvedTcpOptions& options, int rank, int size, int peer,
                  const std::string& peer_address, const std::string& own_address,
                  tcp::Deadline deadline) {
  const tcp::Endpoint endpoint =
      tcp::parse_endpoint(peer_address, "rendezvous entry " + store_key(peer));
  const std::string self = "rank " + std::to_string(rank);
  const std::string peer_name = "peer rank " + std::to_string(peer) + " (" + peer_address + ")";
  tcp::HelloInfo hello;
  hello.kind = tcp::PeerKind::kPair;
  hello.rank = rank;
  hello.target_rank = peer;
  hello.world_size = size;
  hello.address = own_address;
  std::string last_error;
  int attempts = 0;
  tcp::Fd socket =
      tcp::dial_with_retry(endpoint, options.socket_buffer_bytes, options.secret, hello, peer, self,
                           peer_name, deadline, &last_error, &attempts);
  if (!socket.valid()) {
    RINGD_THROW(kTimeout, self << ": could not connect to " << peer_name << " within "
                               << options.timeout.count() << " ms (" << attempts
                               << " attempts; last error: " << last_error
                               << ") — is that rank running and reachable?");
  }
  return socket;
}

}  // namespace

std::unique_ptr<Context> tcp_connect(Store& store, int rank, int size, const TcpOptions& options) {
  RINGD_CHECK_ARG(size >= 1 && rank >= 0 && rank < size,
                  "tcp_connect: invalid rank " << rank << " for world size " << size);
  const tcp::ResolvedTcpOptions resolved = resolve(options);
  const tcp::Deadline deadline = tcp::Clock::now() + resolved.timeout;
  auto device = std::make_shared<tcp::TcpDevice>(rank, size, resolved);
  store.set(store_key(rank), to_bytes(device->listen_address()));
  for (int peer = 0; peer < rank; ++peer) {
    std::string address;
    try {
      address = to_string(
          store.get(store_key(peer), std::chrono::milliseconds(tcp::remaining_ms(deadline))));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
      RINGD_THROW(kTimeout, "rank " << rank << ": waiting for the address of peer rank " << peer
                                    << " in the rendezvous store: " << e.what()
                                    << " — did that rank start?");
    }
    tcp::Fd socket =
        dial_peer(resolved, rank, size, peer, address, device->listen_address(), deadline);
    device->attach_dialed(peer, address, std::move(socket));
  }
  device->wait_for_acceptances(deadline);
  std::vector<std::unique_ptr<Pair>> pairs(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) pairs[peer] = std::make_unique<tcp::TcpPair>(device->channel(peer));
  }
  RINGD_LOG(kInfo) << "rank " << rank << ": tcp mesh of " << size << " ranks connected";
  return std::make_unique<Context>(rank, size, "tcp", std::move(pairs), std::move(device),
                                   resolved.timeout);
}

}  // namespace ringd
