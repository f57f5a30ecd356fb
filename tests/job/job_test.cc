// ringd::Job (include/ringd/job.h): opening a job in one call, here as threads of this process
// with explicit rank/size and a rendezvous on 127.0.0.1 (the environment's sources are
// resolve_topology()'s, tested in topology_test.cc; mpirun's in tests/mpi/mpi_job_test.cc).
#include "ringd/job.h"

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net/socket.h"
#include "ringd/collectives.h"
#include "ringd/error.h"

namespace ringd {
namespace {

using std::chrono::milliseconds;

uint16_t free_port() {
  net::Fd probe = net::listen_on("127.0.0.1", 0, {});
  return net::local_port(probe.get());
}

JobOptions options_for(int rank, int size, uint16_t port) {
  JobOptions options;
  options.rank = rank;
  options.size = size;
  options.transport = "tcp";
  options.rendezvous = "127.0.0.1:" + std::to_string(port);
  options.interface = "lo";
  options.timeout = milliseconds(20000);
  return options;
}

// body(rank) on one thread per rank; every rank's exception, in rank order.
std::vector<std::exception_ptr> run_ranks(int size, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (size_t rank = 0; rank < errors.size(); ++rank) {
    if (!errors[rank]) continue;
    try {
      std::rethrow_exception(errors[rank]);
    } catch (const std::exception& error) {
      ADD_FAILURE() << "rank " << rank << ": " << error.what();
    }
  }
}

TEST(Job, OpensConnectsAndRunsTheEngine) {
  constexpr int kSize = 3;
  const uint16_t port = free_port();
  expect_no_errors(run_ranks(kSize, [&](int rank) {
    Job job(options_for(rank, kSize, port));
    const JobIdentity& identity = job.identity();
    EXPECT_EQ(identity.rank, rank);
    EXPECT_EQ(identity.size, kSize);
    EXPECT_EQ(identity.source, "explicit");
    EXPECT_EQ(identity.transport, "tcp");
    // One process per host unless a launcher says otherwise: each is its own node.
    EXPECT_EQ(identity.local_rank, 0);
    EXPECT_EQ(identity.local_size, 1);
    EXPECT_EQ(identity.cross_rank, rank);
    EXPECT_EQ(identity.cross_size, kSize);

    std::vector<float> values(1000, static_cast<float>(rank + 1));
    Handle handle = job.engine().allreduce_async(
        "grad", {values.data(), DataType::kFloat32, {1000}}, ReduceOp::kSum);
    handle.wait();
    for (const float value : values) ASSERT_EQ(value, 6.0f);

    job.shutdown();
    job.shutdown();  // idempotent
    try {
      job.engine();
      ADD_FAILURE() << "engine() after shutdown()";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("shut down"), std::string::npos) << error.what();
    }
  }));
}

TEST(Job, WithoutAnEngineTheContextIsTheCallers) {
  constexpr int kSize = 2;
  const uint16_t port = free_port();
  expect_no_errors(run_ranks(kSize, [&](int rank) {
    JobOptions options = options_for(rank, kSize, port);
    options.start_engine = false;
    Job job(options);
    int32_t value = rank + 10;
    allreduce(job.context(), &value, &value, 1, DataType::kInt32, ReduceOp::kMax);
    EXPECT_EQ(value, 11);
    try {
      job.engine();
      ADD_FAILURE() << "engine() without start_engine";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(error.what()).find("without an engine"), std::string::npos);
    }
  }));
}

TEST(Job, AWorldOfOneNeedsNoRendezvous) {
  JobOptions options;
  options.rank = 0;
  options.size = 1;
  Job job(options);
  EXPECT_EQ(job.size(), 1);
  EXPECT_EQ(job.identity().cross_size, 1);
  double value = 2.5;
  job.engine().allreduce_async("x", {&value, DataType::kFloat64, {}}, ReduceOp::kAvg).wait();
  EXPECT_EQ(value, 2.5);
}

ErrorCode code_of(const std::function<void()>& body, std::string* message) {
  try {
    body();
  } catch (const Error& error) {
    *message = error.what();
    return error.code();
  }
  *message = "(nothing thrown)";
  return ErrorCode::kInternal;
}

TEST(Job, BadOptionsNameWhatIsWrong) {
  std::string message;
  JobOptions rank_only;
  rank_only.rank = 1;
  EXPECT_EQ(code_of([&] { Job job(rank_only); }, &message), ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("--rank and --size together"), std::string::npos) << message;

  JobOptions inproc;
  inproc.transport = "inproc";
  EXPECT_EQ(code_of([&] { Job job(inproc); }, &message), ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("InprocHub"), std::string::npos) << message;

  JobOptions no_rendezvous;
  no_rendezvous.rank = 0;
  no_rendezvous.size = 2;
  EXPECT_EQ(code_of([&] { Job job(no_rendezvous); }, &message), ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("rendezvous"), std::string::npos) << message;
}

TEST(Job, AMissingPeerFailsTheRanksThatCame) {
  constexpr int kSize = 3;
  const uint16_t port = free_port();
  const auto errors = run_ranks(kSize - 1, [&](int rank) {  // rank 2 never comes
    JobOptions options = options_for(rank, kSize, port);
    options.timeout = milliseconds(1500);
    Job job(options);
  });
  for (int rank = 0; rank < kSize - 1; ++rank) {
    ASSERT_TRUE(errors[static_cast<size_t>(rank)]) << "rank " << rank << " opened without rank 2";
    try {
      std::rethrow_exception(errors[static_cast<size_t>(rank)]);
    } catch (const Error& error) {
      // Rank 0 times out waiting for rank 2; its store goes with it, so rank 1 may see that first.
      if (rank == 0 || error.code() != ErrorCode::kPeerLost) {
        EXPECT_EQ(error.code(), ErrorCode::kTimeout) << "rank " << rank << ": " << error.what();
      }
    }
  }
}

}  // namespace
}  // namespace ringd
