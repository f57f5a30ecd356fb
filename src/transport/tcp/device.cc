#include "transport/tcp/device.h"

#include <sstream>

#include "common/logging.h"

namespace ringd::tcp {

TcpDevice::TcpDevice(int rank, int size, const ResolvedTcpOptions& options)
    : rank_(rank),
      size_(size),
      timeout_(options.timeout),
      job_id_(options.job_id),
      loop_("rank " + std::to_string(rank) + " tcp I/O"),
      channels_(size),
      connected_(size, false) {
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) channels_[peer] = std::make_shared<PairChannel>(rank, peer, loop_);
  }
  net::Fd listener = net::listen_on(options.bind_host, options.port, options.socket);
  listen_address_ = options.advertise_host + ":" + std::to_string(net::local_port(listener.get()));
  net::Acceptor::Callbacks callbacks;
  callbacks.admit = [this](const net::HelloInfo& hello) { return admit(hello); };
  callbacks.on_admitted = [this](net::Fd socket, const net::HelloInfo& hello) {
    on_admitted(std::move(socket), hello);
  };
  callbacks.on_rejected = [this](const net::HelloInfo* hello, ErrorCode code,
                                 const std::string& why) { on_rejected(hello, code, why); };
  acceptor_ = std::make_shared<net::Acceptor>(loop_, std::move(listener), options.secret, rank,
                                              "rank " + std::to_string(rank), std::move(callbacks));
  acceptor_->start(acceptor_);
  RINGD_LOG(kInfo) << "rank " << rank << ": tcp transport listening on " << listen_address_;
}

TcpDevice::~TcpDevice() {
  loop_.stop();
  acceptor_->close();
  for (auto& channel : channels_) {
    if (!channel) continue;
    channel->close(RINGD_MAKE_ERROR(kInvalidArgument, "rank " << rank_ << ": the tcp pair to peer "
                                                              << channel->description()
                                                              << " was closed (its context was "
                                                                 "destroyed)"));
  }
}

void TcpDevice::attach_dialed(int peer, const std::string& peer_address, net::Fd socket) {
  channels_[peer]->set_peer_address(peer_address);
  channels_[peer]->attach(std::move(socket));
  std::lock_guard<std::mutex> lock(mutex_);
  connected_[peer] = true;
}

std::string TcpDevice::admit(const net::HelloInfo& hello) {
  if (hello.kind != net::PeerKind::kPair && hello.kind != net::PeerKind::kConflictNotice) {
    return "this port serves ringd rank pairs, not the TCP store";
  }
  if (hello.job_id != job_id_) {
    return "the dialer belongs to job " + (hello.job_id.empty() ? "(none)" : hello.job_id) +
           ", this rank to job " + job_id_ +
           " — a rank of another job dialed this one (stale rendezvous data, or two jobs on one "
           "--rendezvous)";
  }
  if (hello.kind == net::PeerKind::kConflictNotice) {
    if (hello.rank < 0 || hello.rank >= size_) return "conflict notice for no rank of this job";
    // Acted on here, before the notice is answered: a refused claimant that has sent its notices
    // knows that every rank it reached has already failed.
    fail_on_conflict(hello);
    return "";
  }
  if (hello.world_size != size_) {
    return "world size mismatch: the dialer has " + std::to_string(hello.world_size) +
           " ranks, this rank " + std::to_string(size_);
  }
  if (hello.target_rank != rank_) {
    return "the dialer wanted rank " + std::to_string(hello.target_rank) + " but this is rank " +
           std::to_string(rank_);
  }
  if (hello.rank <= rank_ || hello.rank >= size_) {
    return "rank " + std::to_string(hello.rank) + " is not expected to dial rank " +
           std::to_string(rank_) + " (rank i dials the ranks below i)";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (connected_[hello.rank]) {
    return "duplicate connection for rank " + std::to_string(hello.rank) +
           ", which is already connected";
  }
  return "";
}

void TcpDevice::fail_on_conflict(const net::HelloInfo& notice) {
  std::string holder = "this process";
  if (notice.rank != rank_) {
    holder = "peer " + channels_[notice.rank]->description();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!connected_[notice.rank]) holder = "another process";
  }
  fail_job("rank " + std::to_string(notice.rank) + " of job " + job_id_ +
           " was claimed by two processes: " + holder + " holds it, and " + notice.address +
           " was refused — another job was started with the same --rendezvous and --size; "
           "this job's results cannot be trusted, restart it on a rendezvous address of its own");
}

void TcpDevice::on_admitted(net::Fd socket, const net::HelloInfo& hello) {
  if (hello.kind == net::PeerKind::kConflictNotice)
    return;  // admit() failed the job; closes the socket
  channels_[hello.rank]->set_peer_address(hello.address);
  channels_[hello.rank]->attach(std::move(socket));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connected_[hello.rank] = true;
  }
  changed_.notify_all();
}

void TcpDevice::on_rejected(const net::HelloInfo* hello, ErrorCode code,
                            const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_rejection_ = reason;
  if (code == ErrorCode::kAuth && hello && hello->rank > rank_ && hello->rank < size_ &&
      !connected_[hello->rank]) {
    auth_failed_for_missing_ = true;
  }
}

void TcpDevice::fail_job(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!job_failure_.empty()) return;
    job_failure_ = reason;
  }
  RINGD_LOG(kError) << "rank " << rank_ << ": " << reason;
  for (auto& channel : channels_) {
    if (channel) channel->abort(reason);
  }
  changed_.notify_all();
}

std::string TcpDevice::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return job_failure_;
}

void TcpDevice::wait_for_acceptances(net::Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto all_connected = [&] {
    if (!job_failure_.empty()) return true;
    for (int peer = rank_ + 1; peer < size_; ++peer) {
      if (!connected_[peer]) return false;
    }
    return true;
  };
  if (changed_.wait_until(lock, deadline, all_connected)) {
    if (job_failure_.empty()) return;
    RINGD_THROW(kMismatch, "rank " << rank_ << ": " << job_failure_);
  }
  std::ostringstream missing;
  for (int peer = rank_ + 1; peer < size_; ++peer) {
    if (!connected_[peer]) missing << (missing.tellp() > 0 ? ", " : "") << peer;
  }
  const std::string last = last_rejection_.empty()
                               ? std::string()
                               : "; the last rejected connection: " + last_rejection_;
  if (auth_failed_for_missing_) {
    RINGD_THROW(kAuth, "rank " << rank_ << ": peer rank(s) " << missing.str()
                               << " never passed the job-secret handshake on " << listen_address_
                               << last << " — every rank must use the same RINGD_JOB_SECRET");
  }
  RINGD_THROW(kTimeout, "rank " << rank_ << ": timed out after " << timeout_.count()
                                << " ms waiting for peer rank(s) " << missing.str()
                                << " to connect to " << listen_address_ << last
                                << " — did every rank start, with the same world size?");
}

}  // namespace ringd::tcp
