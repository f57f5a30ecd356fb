// mpi_bootstrap_store(): the tcp transport under mpirun finds its peers through a TcpStoreServer on
// rank 0 whose address travels by MPI_Bcast, so no --rendezvous flag is needed.
// C API only: keep <mpi.h> from pulling in the deprecated C++ bindings (libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "common/logging.h"
#include "common/tunables.h"
#include "ringd/mpi.h"
#include "ringd/tcp.h"
#include "transport/mpi/mpi_errors.h"

namespace ringd {
namespace {

// The IPv4 address of `interface`, or "" when it has none. `available` lists the interfaces seen.
std::string interface_address(const std::string& interface, std::string* available) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* entry = list; entry; entry = entry->ifa_next) {
    if (!entry->ifa_addr || entry->ifa_addr->sa_family != AF_INET) continue;
    if (available) *available += std::string(available->empty() ? "" : " ") + entry->ifa_name;
    if (found.empty() && interface == entry->ifa_name) {
      char text[INET_ADDRSTRLEN] = {0};
      const auto* address = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      if (inet_ntop(AF_INET, &address->sin_addr, text, sizeof text)) found = text;
    }
  }
  freeifaddrs(list);
  return found;
}

std::string host_name_address() {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &result) != 0 || !result) return "";
  char text[INET_ADDRSTRLEN] = {0};
  const auto* address = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
  std::string found = inet_ntop(AF_INET, &address->sin_addr, text, sizeof text) ? text : "";
  freeaddrinfo(result);
  return found;
}

// Where peers can reach rank 0: RINGD_IFACE's address, else this host name's, else loopback.
// (RINGD_IFACE is read here rather than in common/tunables because only this bootstrap uses it.)
std::string advertise_address() {
  if (const char* interface = std::getenv("RINGD_IFACE"); interface && *interface) {
    std::string available;
    std::string address = interface_address(interface, &available);
    if (address.empty()) {
      RINGD_THROW(kInvalidArgument, "RINGD_IFACE=" << interface
                                                   << " has no IPv4 address on this host; "
                                                      "interfaces with one: "
                                                   << available);
    }
    return address;
  }
  std::string address = host_name_address();
  return address.empty() ? "127.0.0.1" : address;
}

// Rank 0's server (kept alive here) plus this rank's client; every call goes to the client.
class BootstrapStore : public Store {
 public:
  BootstrapStore(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStore> client)
      : server_(std::move(server)), client_(std::move(client)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    client_->set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return client_->get(key, timeout);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::unique_ptr<TcpStore> client_;
};

}  // namespace

std::unique_ptr<Store> mpi_bootstrap_store(MPI_Comm comm, const std::string& secret) {
  mpi_ensure_initialized();
  int rank = 0;
  mpi::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");

  // Rank 0 broadcasts "host:port", or "!<reason>" when it could not start the server, so the other
  // ranks fail with the reason instead of waiting.
  std::unique_ptr<TcpStoreServer> server;
  std::string message;
  std::exception_ptr server_error;
  if (rank == 0) {
    try {
      const std::string host = advertise_address();
      server = std::make_unique<TcpStoreServer>("0.0.0.0", 0, secret);
      message = host + ":" + std::to_string(server->port());
      RINGD_LOG(kInfo) << "rendezvous server for the tcp transport listening on " << message;
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
  const size_t colon = message.rfind(':');
  if (colon == std::string::npos) {
    RINGD_THROW(kInternal, "rank " << rank << ": malformed rendezvous address '" << message << "'");
  }
  const std::string host = message.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::stoi(message.substr(colon + 1)));
  auto client = std::make_unique<TcpStore>(host, port, secret, tunables().timeout);
  return std::make_unique<BootstrapStore>(std::move(server), std::move(client));
}

}  // namespace ringd
