// RINGD_TCP_CONGESTION / TcpOptions::tcp_congestion: a tcp job's pair sockets use the chosen
// congestion control on both ends (the dialer sets it, the acceptor inherits it from its
// listener), "system" leaves the kernel's default, and a name the kernel refuses fails the job's
// set-up with an error that names it and what the kernel offers, while ringd's own default only
// warns where the kernel lacks it.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "net/socket.h"
#include "ringd/store.h"
#include "transport/tcp_test_support.h"

namespace ringd {
namespace {

using testing::loopback_options;
using testing::run_ranks;

std::string proc_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string kernel_default() {
  return proc_first_line("/proc/sys/net/ipv4/tcp_congestion_control");
}

// An algorithm this process may set that is not the kernel's default, so that a socket left
// alone cannot pass for one that was set; empty when there is none.
std::string non_default_algorithm() {
  std::istringstream allowed(proc_first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control"));
  for (std::string name; allowed >> name;) {
    if (name != kernel_default()) return name;
  }
  return "";
}

std::string congestion_of(int fd) {
  char name[16] = {};
  socklen_t length = sizeof(name);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return "";
  return std::string(name, strnlen(name, sizeof(name)));
}

// One descriptor of each TCP socket of this process connected to or from one of `ports` (a pair
// holds a second descriptor of its socket for the I/O loop: counted once).
std::vector<int> sockets_on(const std::set<uint16_t>& ports) {
  std::vector<int> found;
  std::set<ino_t> seen;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    struct stat status {};
    if (::fstat(fd, &status) != 0 || !S_ISSOCK(status.st_mode)) continue;
    int type = 0;
    socklen_t length = sizeof(type);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) continue;
    sockaddr_in self{}, peer{};
    socklen_t self_length = sizeof(self), peer_length = sizeof(peer);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_length) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
        self.sin_family != AF_INET) {
      continue;
    }
    if ((ports.count(ntohs(self.sin_port)) || ports.count(ntohs(peer.sin_port))) &&
        seen.insert(status.st_ino).second) {
      found.push_back(fd);
    }
  }
  return found;
}

// Connects a 3-rank job over loopback with `congestion` and returns the congestion control of
// every pair socket (each pair has two ends in this process).
std::vector<std::string> pair_algorithms(const std::string& congestion) {
  MemoryStore store;
  std::vector<std::unique_ptr<Context>> contexts(3);
  run_ranks(3, [&](int rank) {
    TcpOptions options = loopback_options();
    options.tcp_congestion = congestion;
    contexts[rank] = tcp_connect(store, rank, 3, options);
  });
  std::set<uint16_t> ports;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string address =
        to_string(store.get("tcp/" + std::to_string(rank), std::chrono::milliseconds(1000)));
    ports.insert(net::parse_endpoint(address, "test").port);
  }
  std::vector<std::string> algorithms;
  for (const int fd : sockets_on(ports)) algorithms.push_back(congestion_of(fd));
  return algorithms;
}

TEST(TcpCongestion, EveryPairSocketUsesTheChosenAlgorithmOnBothEnds) {
  const std::string chosen = non_default_algorithm();
  if (chosen.empty()) {
    GTEST_SKIP() << "every algorithm allowed here is the kernel's default (" << kernel_default()
                 << "): nothing tells a set socket from a default one";
  }
  const std::vector<std::string> algorithms = pair_algorithms(chosen);
  ASSERT_EQ(algorithms.size(), 6u) << "3 ranks: 3 pairs, 2 ends each";
  for (const std::string& algorithm : algorithms) EXPECT_EQ(algorithm, chosen);
}

TEST(TcpCongestion, SystemKeepsTheKernelsDefault) {
  const std::vector<std::string> algorithms = pair_algorithms("system");
  ASSERT_EQ(algorithms.size(), 6u);
  for (const std::string& algorithm : algorithms) EXPECT_EQ(algorithm, kernel_default());
}

TEST(TcpCongestion, AnAlgorithmTheKernelRefusesIsNamedWithWhatItOffers) {
  MemoryStore store;
  TcpOptions options = loopback_options();
  options.tcp_congestion = "nosuchcc";
  try {
    tcp_connect(store, 0, 2, options);
    FAIL() << "a congestion control the kernel does not have was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << what;
    EXPECT_NE(what.find("RINGD_TCP_CONGESTION"), std::string::npos) << what;
    EXPECT_NE(what.find("'nosuchcc'"), std::string::npos) << what;
    EXPECT_NE(what.find("available: " +
                        proc_first_line("/proc/sys/net/ipv4/tcp_available_congestion_control")),
              std::string::npos)
        << what;
  }
}

// ringd's default where a kernel or sandbox lacks it: the socket keeps the kernel's default and
// the job goes on (one warning per process), unlike a name someone chose (above).
TEST(TcpCongestion, ADefaultTheKernelRefusesLeavesItsOwn) {
  const net::Fd listener = net::listen_on("127.0.0.1", 0, {0, "nosuchcc", false});
  ASSERT_TRUE(listener.valid());
  EXPECT_EQ(congestion_of(listener.get()), kernel_default());
  int error = 0;
  const net::Fd socket =
      net::connect_to({"127.0.0.1", net::local_port(listener.get())}, {0, "nosuchcc", false},
                      testing::in(std::chrono::milliseconds(5000)), &error);
  ASSERT_TRUE(socket.valid()) << net::errno_text(error);
  EXPECT_EQ(congestion_of(socket.get()), kernel_default());
  EXPECT_THROW(net::listen_on("127.0.0.1", 0, {0, "nosuchcc", true}), Error);
}

}  // namespace
}  // namespace ringd
