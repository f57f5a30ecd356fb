// Everything one tcp context owns: its I/O loop (one epoll thread), the listening socket (open for
// the context's whole life, rejecting intruders), and one PairChannel per peer. tcp_connect()
// builds it and hands it to Context as the keepalive, so it is destroyed after the pairs.
//
// Mesh rule: rank i dials every rank j < i; rank j accepts from every rank above it and learns who
// is calling from the authenticated HELLO, which must carry this rank's job id. The listener also
// takes conflict notices (a second process claimed a rank of this job): the job then fails on
// every rank, naming both claimants.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/acceptor.h"
#include "net/io_loop.h"
#include "transport/tcp/pair.h"

namespace ringd::tcp {

struct ResolvedTcpOptions {
  std::string bind_host;
  std::string advertise_host;
  uint16_t port = 0;
  std::string secret;
  std::string job_id;  // the job this rank joined (rendezvous/job_membership.h)
  std::chrono::milliseconds timeout{0};
  net::SocketTuning socket;  // buffer sizes and congestion control of every pair's socket
};

class TcpDevice {
 public:
  TcpDevice(int rank, int size, const ResolvedTcpOptions& options);
  ~TcpDevice();  // stops the I/O thread, closes every socket; never blocks on a peer
  TcpDevice(const TcpDevice&) = delete;
  TcpDevice& operator=(const TcpDevice&) = delete;

  const std::string& listen_address() const { return listen_address_; }  // advertised host:port
  std::shared_ptr<PairChannel> channel(int peer) const { return channels_[peer]; }
  // A socket this rank dialed to `peer` (< rank) and authenticated.
  void attach_dialed(int peer, const std::string& peer_address, net::Fd socket);
  // Blocks until every rank above this one has connected. At the deadline throws kAuth when
  // a connection claiming a missing rank failed the secret check, else kTimeout; throws kMismatch
  // at once when a conflict notice arrived.
  void wait_for_acceptances(net::Deadline deadline);
  // Fails the job: every pair is aborted with `reason` (each peer is told), and a wait for
  // acceptances throws it. For a second claim of a rank (a conflict notice, or one recorded in
  // the store). Any thread.
  void fail_job(const std::string& reason);
  // The reason given to fail_job(), or "".
  std::string failure() const;

 private:
  std::string admit(const net::HelloInfo& hello);  // the I/O thread
  void on_admitted(net::Fd socket, const net::HelloInfo& hello);
  void fail_on_conflict(const net::HelloInfo& notice);  // fail_job() naming both claimants
  void on_rejected(const net::HelloInfo* hello, ErrorCode code, const std::string& reason);

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  const std::string job_id_;
  net::IoLoop loop_;  // declared first: destroyed last
  std::vector<std::shared_ptr<PairChannel>> channels_;
  std::shared_ptr<net::Acceptor> acceptor_;
  std::string listen_address_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> connected_;           // guarded by mutex_
  std::string last_rejection_;            // guarded by mutex_
  bool auth_failed_for_missing_ = false;  // guarded by mutex_
  std::string job_failure_;               // guarded by mutex_
};

}  // namespace ringd::tcp
