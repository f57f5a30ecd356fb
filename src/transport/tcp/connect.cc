// tcp_connect(): join the store's job and claim this rank (rendezvous/job_membership.h), listen,
// publish "host:port" under "tcp/<rank>", dial every lower rank (retrying with back-off until the
// timeout), wait for every higher rank to dial in, check that nobody else claimed a rank of the
// job meanwhile, return the Context. A process whose claim is refused tells every rank of the job
// that already listens (a conflict notice), records the conflict in the store, and fails.
#include <thread>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/handshake.h"
#include "rendezvous/job_membership.h"
#include "ringd/error.h"
#include "ringd/tcp.h"
#include "transport/tcp/device.h"

namespace ringd {
namespace {

// A world of one opens no connection, so its missing secret is not worth a warning.
tcp::ResolvedTcpOptions resolve(const TcpOptions& options, int size) {
  tcp::ResolvedTcpOptions resolved;
  const std::string& interface =
      options.interface.empty() ? tunables().interface : options.interface;
  resolved.bind_host =
      options.bind_address.empty() ? net::default_host_address(interface) : options.bind_address;
  resolved.advertise_host = options.advertise_address;
  if (resolved.advertise_host.empty()) {
    resolved.advertise_host =
        resolved.bind_host == "0.0.0.0" ? net::default_host_address(interface) : resolved.bind_host;
  }
  resolved.port = options.port;
  resolved.secret = size > 1 ? net::resolve_secret(options.secret) : options.secret;
  resolved.job_id = options.job_id;
  resolved.timeout = options.timeout.count() > 0 ? options.timeout : tunables().timeout;
  resolved.socket = net::data_socket_tuning();  // what the options leave unset
  if (options.socket_buffer_bytes > 0) resolved.socket.buffer_bytes = options.socket_buffer_bytes;
  if (!options.tcp_congestion.empty()) {
    resolved.socket.congestion = net::congestion_setting(options.tcp_congestion);
    resolved.socket.congestion_required = true;  // chosen by the caller
  }
  return resolved;
}

std::string store_key(int rank) { return "tcp/" + std::to_string(rank); }

// Connects to `peer` and runs the handshake, retrying refused or dropped connections with
// exponential back-off (10 ms .. 1 s) until `deadline`. Authentication and protocol failures are
// final.
net::Fd dial_peer(const tcp::ResolvedTcpOptions& options, int rank, int size, int peer,
                  const std::string& peer_address, const std::string& own_address,
                  net::Deadline deadline) {
  const net::Endpoint endpoint =
      net::parse_endpoint(peer_address, "rendezvous entry " + store_key(peer));
  const std::string self = "rank " + std::to_string(rank);
  const std::string peer_name = "peer rank " + std::to_string(peer) + " (" + peer_address + ")";
  net::HelloInfo hello;
  hello.kind = net::PeerKind::kPair;
  hello.rank = rank;
  hello.target_rank = peer;
  hello.world_size = size;
  hello.job_id = options.job_id;
  hello.address = own_address;
  std::string last_error;
  int attempts = 0;
  net::Fd socket = net::dial_with_retry(endpoint, options.socket, options.secret, hello, peer, self,
                                        peer_name, deadline, &last_error, &attempts);
  if (!socket.valid()) {
    RINGD_THROW(kTimeout, self << ": could not connect to " << peer_name << " within "
                               << options.timeout.count() << " ms (" << attempts
                               << " attempts; last error: " << last_error
                               << ") — is that rank running and reachable?");
  }
  return socket;
}

// Tells every rank of the job that publishes an address that rank `rank` was claimed twice (this
// process being refused), so a job that formed with the other claimant fails on every rank.
void send_conflict_notices(Store& store, const tcp::ResolvedTcpOptions& options, int rank, int size,
                           const std::string& who) {
  net::HelloInfo hello;
  hello.kind = net::PeerKind::kConflictNotice;
  hello.rank = rank;
  hello.world_size = size;
  hello.job_id = options.job_id;
  hello.address = who;
  const net::Deadline deadline = net::Clock::now() + std::chrono::seconds(5);
  for (int peer = 0; peer < size; ++peer) {
    try {
      const std::string address =
          to_string(store.get(store_key(peer), std::chrono::milliseconds(0)));
      const std::string self = "rank " + std::to_string(rank) + " (refused)";
      int error = 0;
      net::Fd socket = net::connect_to(net::parse_endpoint(address, store_key(peer)),
                                       options.socket, deadline, &error);
      if (!socket.valid()) continue;
      hello.target_rank = peer;
      net::dial_handshake(socket.get(), options.secret, hello, peer, self,
                          "rank " + std::to_string(peer) + " (" + address + ")", deadline);
    } catch (const Error&) {
      // Not published, gone, or of another job: nothing to tell.
    }
  }
}

// Claims `rank` in the store's job; a refused claim is recorded and announced, then thrown.
void claim_rank(Store& store, const tcp::ResolvedTcpOptions& options, int rank, int size,
                const std::string& listen_address) {
  const std::string who = rendezvous::claimant(listen_address);
  const std::string holder = rendezvous::claim_rank(store, rank, who);
  if (holder.empty()) return;
  rendezvous::record_conflict(store, "rank " + std::to_string(rank) + " of job " + options.job_id +
                                         " was claimed twice: by " + holder + ", then by " + who);
  send_conflict_notices(store, options, rank, size, who);
  RINGD_THROW(kMismatch, "rank " << rank << ": rank " << rank << " of job " << options.job_id
                                 << " was already claimed by " << holder << "; this process ("
                                 << who << ") was refused — two processes were started as rank "
                                 << rank << " (another job with the same --rendezvous and "
                                 << "--size?); every rank of job " << options.job_id
                                 << " was told to stop");
}

// Dials the lower ranks and waits for the higher ones to dial in.
void connect_mesh(Store& store, const tcp::ResolvedTcpOptions& resolved, int rank, int size,
                  tcp::TcpDevice& device, net::Deadline deadline) {
  for (int peer = 0; peer < rank; ++peer) {
    std::string address;
    try {
      address = to_string(
          store.get(store_key(peer), std::chrono::milliseconds(net::remaining_ms(deadline))));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
      RINGD_THROW(kTimeout, "rank " << rank << ": waiting for the address of peer rank " << peer
                                    << " in the rendezvous store: " << e.what()
                                    << " — did that rank start?");
    }
    net::Fd socket =
        dial_peer(resolved, rank, size, peer, address, device.listen_address(), deadline);
    device.attach_dialed(peer, address, std::move(socket));
  }
  device.wait_for_acceptances(deadline);
}

}  // namespace

std::unique_ptr<Context> tcp_connect(Store& store, int rank, int size, const TcpOptions& options) {
  RINGD_CHECK_ARG(size >= 1 && rank >= 0 && rank < size,
                  "tcp_connect: invalid rank " << rank << " for world size " << size);
  tcp::ResolvedTcpOptions resolved = resolve(options, size);
  const net::Deadline deadline = net::Clock::now() + resolved.timeout;
  resolved.job_id = rendezvous::join_job(store, rank, size, options.job_id, options.job_source);
  auto device = std::make_shared<tcp::TcpDevice>(rank, size, resolved);
  claim_rank(store, resolved, rank, size, device->listen_address());
  store.set(store_key(rank), to_bytes(device->listen_address()));
  try {
    connect_mesh(store, resolved, rank, size, *device, deadline);
  } catch (const Error& error) {
    // A peer that was told of a second claim stops listening: say why, not only that it is gone.
    const std::string conflict = rendezvous::recorded_conflict(store);
    if (conflict.empty()) throw;
    RINGD_THROW(kMismatch, "rank " << rank << ": " << conflict
                                   << " — the job stopped while this rank formed its mesh ("
                                   << error.what() << ")");
  }
  // A second claim recorded before this rank listened could not be announced to it.
  const std::string conflict = rendezvous::recorded_conflict(store);
  if (!conflict.empty()) {
    device->fail_job(conflict +
                     " — another job was started with the same --rendezvous and --size; "
                     "restart this job on a rendezvous address of its own");
  }
  const std::string failure = device->failure();
  if (!failure.empty()) RINGD_THROW(kMismatch, "rank " << rank << ": " << failure);
  std::vector<std::unique_ptr<Pair>> pairs(size);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) pairs[peer] = std::make_unique<tcp::TcpPair>(device->channel(peer));
  }
  RINGD_LOG(kInfo) << "rank " << rank << ": tcp mesh of " << size << " ranks of job "
                   << resolved.job_id << " connected";
  return std::make_unique<Context>(rank, size, "tcp", std::move(pairs), std::move(device),
                                   resolved.timeout);
}

}  // namespace ringd
