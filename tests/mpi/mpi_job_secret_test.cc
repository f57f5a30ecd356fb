// mpi_job_secret (run under mpirun with 2, 3 and 4 ranks): without a configured secret every rank
// gets the same fresh 64-hex-digit secret from rank 0, a new one per call; a configured one is
// kept.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cctype>
#include <string>
#include <vector>

#include "ringd/mpi.h"

namespace ringd {
namespace {

std::vector<char> gather_secret(const std::string& secret) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(static_cast<size_t>(size) * 64, '\0');
  std::vector<char> mine(64, '\0');
  for (size_t i = 0; i < secret.size() && i < 64; ++i) mine[i] = secret[i];
  MPI_Allgather(mine.data(), 64, MPI_CHAR, all.data(), 64, MPI_CHAR, MPI_COMM_WORLD);
  return all;
}

TEST(MpiJobSecret, EveryRankGetsRankZerosFreshSecret) {
  const std::string first = mpi_job_secret(MPI_COMM_WORLD, "");
  ASSERT_EQ(first.size(), 64u);
  for (const char c : first) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << first;
  const std::vector<char> all = gather_secret(first);
  for (size_t r = 0; r < all.size() / 64; ++r) {
    EXPECT_EQ(std::string(all.data() + r * 64, 64), first) << "rank " << r;
  }
  const std::string second = mpi_job_secret(MPI_COMM_WORLD, "");
  EXPECT_NE(second, first) << "a new job gets a new secret";
}

TEST(MpiJobSecret, AConfiguredSecretIsKept) {
  EXPECT_EQ(mpi_job_secret(MPI_COMM_WORLD, "from-the-environment"), "from-the-environment");
}

}  // namespace
}  // namespace ringd

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ringd::mpi_ensure_initialized();  // finalized at exit
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {  // one rank prints; every rank's exit code counts
    delete ::testing::UnitTest::GetInstance()->listeners().Release(
        ::testing::UnitTest::GetInstance()->listeners().default_result_printer());
  }
  return RUN_ALL_TESTS();
}
