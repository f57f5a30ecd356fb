// resolve_topology(): where a process sits in the job, from flags and (a fake) environment.
#include "job/topology.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ringd/error.h"
#include "testing/fake_env.h"

namespace ringd::job {
namespace {

using testing::fake_env;

const EnvLookup kNoEnv = fake_env({});
const EnvLookup kMpirun = fake_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}});

// The message of the ringd::Error that `body` throws with `code`; fails the test otherwise.
template <typename Body>
std::string error_message(ErrorCode code, Body body) {
  try {
    body();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no ringd::Error thrown";
  return "";
}

TEST(Topology, AloneWithoutFlagsIsAWorldOfOneOverTcp) {
  const Topology t = resolve_topology({}, kNoEnv, true);
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.size, 1);
  EXPECT_FALSE(t.under_mpirun);
  EXPECT_EQ(t.transport, "tcp");
  EXPECT_TRUE(t.rendezvous_host.empty());
}

TEST(Topology, UnderMpirunTakesRankAndSizeFromOpenMpi) {
  const Topology t = resolve_topology({}, kMpirun, true);
  EXPECT_TRUE(t.under_mpirun);
  EXPECT_EQ(t.rank, 2);
  EXPECT_EQ(t.size, 4);
  EXPECT_EQ(t.transport, "mpi");
}

TEST(Topology, UnderMpirunWithTcpBootstrapsThroughMpi) {
  TopologyFlags flags;
  flags.transport = "tcp";
  const Topology t = resolve_topology(flags, kMpirun, true);
  EXPECT_EQ(t.transport, "tcp");
  EXPECT_EQ(t.rank, 2);
  EXPECT_TRUE(t.rendezvous_host.empty());
}

TEST(Topology, UnderMpirunWithoutMpiBuiltDefaultsToTcpAndNeedsARendezvous) {
  const std::string message =
      error_message(ErrorCode::kInvalidArgument, [] { resolve_topology({}, kMpirun, false); });
  EXPECT_NE(message.find("--rendezvous"), std::string::npos) << message;
  TopologyFlags flags;
  flags.rendezvous = "10.0.0.1:29500";
  const Topology t = resolve_topology(flags, kMpirun, false);
  EXPECT_EQ(t.transport, "tcp");
  EXPECT_EQ(t.rendezvous_host, "10.0.0.1");
  EXPECT_EQ(t.rendezvous_port, 29500);
}

TEST(Topology, FlagsThatContradictMpirunAreRejected) {
  TopologyFlags flags;
  flags.rank = 1;
  const std::string message =
      error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology(flags, kMpirun, true); });
  EXPECT_NE(message.find("rank 2 of 4"), std::string::npos) << message;
  flags.rank = 2;
  flags.size = 4;
  EXPECT_EQ(resolve_topology(flags, kMpirun, true).rank, 2);
}

TEST(Topology, MalformedOpenMpiEnvironmentIsRejected) {
  const auto env = fake_env({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology({}, env, true); });
}

TEST(Topology, StandaloneFlags) {
  TopologyFlags flags;
  flags.rank = 3;
  flags.size = 8;
  flags.rendezvous = "127.0.0.1:41000";
  const Topology t = resolve_topology(flags, kNoEnv, true);
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.size, 8);
  EXPECT_EQ(t.transport, "tcp");
  EXPECT_EQ(t.rendezvous_host, "127.0.0.1");
  EXPECT_EQ(t.rendezvous_port, 41000);
}

TEST(Topology, StandaloneFlagErrorsNameTheFlag) {
  TopologyFlags missing_rendezvous;
  missing_rendezvous.rank = 0;
  missing_rendezvous.size = 2;
  EXPECT_NE(error_message(ErrorCode::kInvalidArgument,
                          [&] { resolve_topology(missing_rendezvous, kNoEnv, true); })
                .find("--rendezvous"),
            std::string::npos);

  TopologyFlags rank_only;
  rank_only.rank = 0;
  EXPECT_NE(
      error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology(rank_only, kNoEnv, true); })
          .find("--size"),
      std::string::npos);

  TopologyFlags out_of_range;
  out_of_range.rank = 4;
  out_of_range.size = 4;
  out_of_range.rendezvous = "h:1";
  EXPECT_NE(error_message(ErrorCode::kInvalidArgument,
                          [&] { resolve_topology(out_of_range, kNoEnv, true); })
                .find("outside 0..3"),
            std::string::npos);
}

TEST(Topology, MpiTransportNeedsMpirunAndAnMpiBuild) {
  TopologyFlags flags;
  flags.transport = "mpi";
  error_message(ErrorCode::kUnavailable, [&] { resolve_topology(flags, kMpirun, false); });
  EXPECT_EQ(resolve_topology(flags, kNoEnv, true).size, 1);  // singleton MPI is fine
  flags.rank = 0;
  flags.size = 2;
  error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology(flags, kNoEnv, true); });
}

TEST(Topology, InprocRanksAreThreadsOfThisProcess) {
  TopologyFlags flags;
  flags.transport = "inproc";
  flags.inproc_ranks = 5;
  const Topology t = resolve_topology(flags, kMpirun, true);
  EXPECT_EQ(t.transport, "inproc");
  EXPECT_EQ(t.size, 5);
  EXPECT_EQ(t.rank, 0);

  TopologyFlags ranks_without_inproc;
  ranks_without_inproc.inproc_ranks = 5;
  EXPECT_NE(error_message(ErrorCode::kInvalidArgument,
                          [&] { resolve_topology(ranks_without_inproc, kNoEnv, true); })
                .find("--ranks"),
            std::string::npos);

  flags.rank = 1;
  flags.size = 5;
  error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology(flags, kNoEnv, true); });
}

TEST(Topology, IbverbsFindsPeersLikeTcp) {
  TopologyFlags flags;
  flags.transport = "ibverbs";
  const Topology under_mpirun = resolve_topology(flags, kMpirun, true);
  EXPECT_EQ(under_mpirun.transport, "ibverbs");
  EXPECT_EQ(under_mpirun.rank, 2);
  EXPECT_TRUE(under_mpirun.rendezvous_host.empty());  // the store comes through MPI

  flags.rank = 1;
  flags.size = 3;
  const std::string message =
      error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology(flags, kNoEnv, true); });
  EXPECT_NE(message.find("--rendezvous host:port is required"), std::string::npos) << message;
  flags.rendezvous = "10.0.0.1:29500";
  const Topology standalone = resolve_topology(flags, kNoEnv, true);
  EXPECT_EQ(standalone.transport, "ibverbs");
  EXPECT_EQ(standalone.rendezvous_host, "10.0.0.1");

  TopologyFlags wrong;
  wrong.transport = "verbs";
  EXPECT_NE(
      error_message(ErrorCode::kInvalidArgument, [&] { resolve_topology(wrong, kNoEnv, true); })
          .find("not one of tcp, mpi, ibverbs, inproc"),
      std::string::npos);
}

TEST(Topology, ParseHostPort) {
  std::string host;
  uint16_t port = 0;
  parse_host_port("--x", "node-3.svc:29500", &host, &port);
  EXPECT_EQ(host, "node-3.svc");
  EXPECT_EQ(port, 29500);
  parse_host_port("--x", "[::1]:80", &host, &port);
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 80);
  for (const char* bad :
       {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x", "a:b:1", "[::1]80"}) {
    EXPECT_THROW(parse_host_port("--x", bad, &host, &port), Error) << bad;
  }
}

TEST(Topology, UnderMpirunReadsTheLocalRankAndSize) {
  const Topology plain = resolve_topology({}, kMpirun, true);
  EXPECT_EQ(plain.local_rank, 0);  // Open MPI older than 1.3 sets neither: one per host
  EXPECT_EQ(plain.local_size, 1);
  EXPECT_EQ(plain.source, "mpirun");
  const Topology t = resolve_topology({},
                                      fake_env({{"OMPI_COMM_WORLD_RANK", "3"},
                                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                                {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                                      true);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 2);
  EXPECT_NE(error_message(ErrorCode::kInvalidArgument,
                          [] {
                            resolve_topology({},
                                             fake_env({{"OMPI_COMM_WORLD_RANK", "3"},
                                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                                             true);
                          })
                .find("OMPI_COMM_WORLD_LOCAL_RANK=2 OMPI_COMM_WORLD_LOCAL_SIZE=2"),
            std::string::npos);
}

const EnvLookup kTorchrun = fake_env({{"RANK", "5"},
                                      {"WORLD_SIZE", "8"},
                                      {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "4"},
                                      {"MASTER_ADDR", "10.0.0.1"},
                                      {"MASTER_PORT", "29400"}});

TEST(Topology, UnderTorchrunTakesItsVariablesAndRendezvousesNextToItsStore) {
  const Topology t = resolve_topology({}, kTorchrun, true);
  EXPECT_TRUE(t.under_torchrun);
  EXPECT_FALSE(t.under_mpirun);
  EXPECT_EQ(t.source, "torchrun");
  EXPECT_EQ(t.rank, 5);
  EXPECT_EQ(t.size, 8);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 4);
  EXPECT_EQ(t.transport, "tcp");  // not mpi: nothing here started MPI
  EXPECT_EQ(t.rendezvous_host, "10.0.0.1");
  EXPECT_EQ(t.rendezvous_port, 29401);  // torchrun's own store holds MASTER_PORT

  TopologyFlags explicit_rendezvous;
  explicit_rendezvous.rendezvous = "10.0.0.9:7000";
  const Topology flagged = resolve_topology(explicit_rendezvous, kTorchrun, true);
  EXPECT_EQ(flagged.rendezvous_host, "10.0.0.9");
  EXPECT_EQ(flagged.rendezvous_port, 7000);

  const Topology own_port = resolve_topology({},
                                             fake_env({{"RANK", "0"},
                                                       {"WORLD_SIZE", "2"},
                                                       {"MASTER_ADDR", "h"},
                                                       {"MASTER_PORT", "29400"},
                                                       {"RINGD_RENDEZVOUS_PORT", "31000"}}),
                                             true);
  EXPECT_EQ(own_port.rendezvous_port, 31000);
  EXPECT_EQ(own_port.local_size, 1);  // no LOCAL_WORLD_SIZE: one per host
}

TEST(Topology, UnderTorchrunBadInputsNameTheVariable) {
  const auto message = [](std::map<std::string, std::string> values, TopologyFlags flags = {}) {
    return error_message(ErrorCode::kInvalidArgument,
                         [&] { resolve_topology(flags, fake_env(values), true); });
  };
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2 WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(message({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}})
                .find("MASTER_ADDR is not set"),
            std::string::npos);
  EXPECT_NE(message({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(message({{"RANK", "1"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "h"},
                     {"RINGD_RENDEZVOUS_PORT", "nan"}})
                .find("RINGD_RENDEZVOUS_PORT=nan is not a port"),
            std::string::npos);
  EXPECT_NE(
      message({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"}})
          .find("MASTER_PORT=65535 + 1"),
      std::string::npos);
  TopologyFlags contradicting;
  contradicting.rank = 0;
  EXPECT_NE(
      message({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
              contradicting)
          .find("contradict torchrun"),
      std::string::npos);
  TopologyFlags mpi;
  mpi.transport = "mpi";
  EXPECT_NE(message({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, mpi).find("needs mpirun"),
            std::string::npos);
}

TEST(Topology, MpirunWinsOverTorchrunVariables) {
  const Topology t = resolve_topology({},
                                      fake_env({{"OMPI_COMM_WORLD_RANK", "1"},
                                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                                {"RANK", "0"},
                                                {"WORLD_SIZE", "9"}}),
                                      true);
  EXPECT_EQ(t.source, "mpirun");
  EXPECT_EQ(t.size, 2);
}

TEST(Topology, SourceSaysWhatPlacedTheProcess) {
  EXPECT_EQ(resolve_topology({}, kNoEnv, true).source, "single");
  TopologyFlags flags;
  flags.rank = 0;
  flags.size = 1;
  EXPECT_EQ(resolve_topology(flags, kNoEnv, true).source, "explicit");
  TopologyFlags inproc;
  inproc.transport = "inproc";
  EXPECT_EQ(resolve_topology(inproc, kMpirun, true).source, "inproc");
}

TEST(Topology, RingdTransportChoosesWhenNoFlagDoes) {
  const EnvLookup tcp_under_mpirun = fake_env(
      {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RINGD_TRANSPORT", "tcp"}});
  EXPECT_EQ(resolve_topology({}, tcp_under_mpirun, true).transport, "tcp");
  TopologyFlags flags;
  flags.transport = "mpi";  // the flag wins
  EXPECT_EQ(resolve_topology(flags, tcp_under_mpirun, true).transport, "mpi");
  const std::string message = error_message(ErrorCode::kInvalidArgument, [] {
    resolve_topology({}, fake_env({{"RINGD_TRANSPORT", "carrier-pigeon"}}), true);
  });
  EXPECT_NE(message.find("RINGD_TRANSPORT=carrier-pigeon is not one of"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace ringd::job
