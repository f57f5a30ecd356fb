// mpi_bootstrap_store(): the tcp transport under mpirun finds its peers through a TcpStoreServer on
// rank 0 whose address travels by MPI_Bcast, so no --rendezvous flag is needed. The job's identity
// comes from MPI too: rank 0 chooses a random job id, creates the store's job record with it and
// broadcasts it beside the address; every rank joins the store's job expecting that id
// (rendezvous/job_membership.h), so a store that serves another job is refused.
// C API only: keep <mpi.h> from pulling in the deprecated C++ bindings (libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif

#include <sstream>
#include <string>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/socket.h"
#include "rendezvous/job_membership.h"
#include "ringd/mpi.h"
#include "ringd/tcp.h"
#include "transport/mpi/mpi_errors.h"

namespace ringd {
namespace {

// Rank 0's server (kept alive here) plus this rank's client; every call goes to the client.
class BootstrapStore : public Store {
 public:
  BootstrapStore(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStore> client)
      : server_(std::move(server)), client_(std::move(client)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    client_->set(key, value);
  }
  bool add(const std::string& key, const std::vector<uint8_t>& value,
           std::vector<uint8_t>* existing) override {
    return client_->add(key, value, existing);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return client_->get(key, timeout);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::unique_ptr<TcpStore> client_;
};

}  // namespace

std::unique_ptr<Store> mpi_bootstrap_store(MPI_Comm comm, const std::string& secret,
                                           const std::string& interface) {
  mpi_ensure_initialized();
  int rank = 0;
  int size = 0;
  mpi::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  mpi::check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");

  // Rank 0 broadcasts "<job id> host:port", or "!<reason>" when it could not start the server, so
  // the other ranks fail with the reason instead of waiting.
  std::unique_ptr<TcpStoreServer> server;
  std::string message;
  std::exception_ptr server_error;
  if (rank == 0) {
    try {
      // Where peers can reach rank 0: the interface's address (--iface, else RINGD_IFACE), else
      // this host name's, else loopback.
      const std::string host =
          net::default_host_address(interface.empty() ? tunables().interface : interface);
      server = std::make_unique<TcpStoreServer>("0.0.0.0", 0, secret);
      const std::string address = host + ":" + std::to_string(server->port());
      message = rendezvous::new_job_id() + " " + address;
      RINGD_LOG(kInfo) << "rendezvous server for the tcp transport listening on " << address;
    } catch (const std::exception& error) {
      server_error = std::current_exception();
      message = std::string("!") + error.what();
    }
  }
  int length = static_cast<int>(message.size());
  mpi::check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, comm),
                 "rank " + std::to_string(rank) + ": MPI_Bcast of the rendezvous address");
  message.resize(static_cast<size_t>(length));
  mpi::check_mpi(MPI_Bcast(message.data(), length, MPI_CHAR, 0, comm),
                 "rank " + std::to_string(rank) + ": MPI_Bcast of the rendezvous address");
  if (server_error) std::rethrow_exception(server_error);
  if (!message.empty() && message[0] == '!') {
    RINGD_THROW(kUnavailable, "rank " << rank << ": rank 0 could not start the rendezvous server: "
                                      << message.substr(1));
  }
  const size_t space = message.find(' ');
  const size_t colon = message.rfind(':');
  if (space == std::string::npos || colon == std::string::npos || colon < space) {
    RINGD_THROW(kInternal, "rank " << rank << ": malformed rendezvous address '" << message << "'");
  }
  const std::string job_id = message.substr(0, space);
  const std::string host = message.substr(space + 1, colon - space - 1);
  const auto port = static_cast<uint16_t>(std::stoi(message.substr(colon + 1)));
  auto client = std::make_unique<TcpStore>(host, port, secret, tunables().timeout);
  // Every rank proposes the broadcast id, so the record is the same whoever comes first.
  rendezvous::join_job(*client, rank, size, job_id);
  return std::make_unique<BootstrapStore>(std::move(server), std::move(client));
}

}  // namespace ringd
