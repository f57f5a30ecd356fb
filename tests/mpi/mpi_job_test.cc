// ringd::Job under mpirun (2, 3 and 4 ranks, all on this host): the identity comes from Open MPI's
// variables, local ranks included (cross_size 1: one node), and the job runs over the mpi
// transport or over tcp bootstrapped through MPI.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ringd/job.h"

namespace ringd {
namespace {

int env_int(const char* name) {
  const char* text = std::getenv(name);
  return text ? std::atoi(text) : -1;
}

void check_identity_and_allreduce(Job& job, const std::string& transport) {
  const JobIdentity& identity = job.identity();
  EXPECT_EQ(identity.source, "mpirun");
  EXPECT_EQ(identity.transport, transport);
  EXPECT_EQ(identity.rank, env_int("OMPI_COMM_WORLD_RANK"));
  EXPECT_EQ(identity.size, env_int("OMPI_COMM_WORLD_SIZE"));
  EXPECT_EQ(identity.local_rank, identity.rank);  // every rank on this host
  EXPECT_EQ(identity.local_size, identity.size);
  EXPECT_EQ(identity.cross_rank, 0);
  EXPECT_EQ(identity.cross_size, 1);

  std::vector<int64_t> values(4096, identity.rank);
  job.engine()
      .allreduce_async("ranks", {values.data(), DataType::kInt64, {4096}}, ReduceOp::kSum)
      .wait();
  const int64_t expected = static_cast<int64_t>(identity.size) * (identity.size - 1) / 2;
  for (const int64_t value : values) ASSERT_EQ(value, expected);
}

TEST(MpiJob, OverMpiFromOpenMpisVariables) {
  Job job;  // everything from the environment: mpirun's variables, the mpi transport
  check_identity_and_allreduce(job, "mpi");
}

TEST(MpiJob, OverTcpBootstrappedThroughMpi) {
  JobOptions options;
  options.transport = "tcp";
  options.interface = "lo";
  Job job(options);
  check_identity_and_allreduce(job, "tcp");
}

}  // namespace
}  // namespace ringd

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // MPI starts inside the first Job (with the thread level its engine needs): no MPI call here.
  if (ringd::env_int("OMPI_COMM_WORLD_RANK") > 0) {  // one rank prints; every exit code counts
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  return RUN_ALL_TESTS();
}
