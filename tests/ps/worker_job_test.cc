// make_worker_sync, the way `ringd train --mode ps` gets its PsSync: co-located servers on
// workers 0..K-1 (addresses allgathered over the job's Context, here inproc threads) give the
// serial result bit for bit, and each hosting worker keeps its server until every worker is done;
// servers given by address; flag checks.
#include "ps/worker_job.h"

#include <gtest/gtest.h>

#include "ps/ps_test_support.h"
#include "ringd/error.h"
#include "ringd/inproc.h"

namespace ringd::ps {
namespace {

using testing::ToyModel;

void check_serial(const std::vector<std::vector<std::vector<float>>>& finals,
                  const std::vector<size_t>& counts, int workers, int64_t steps,
                  model::SgdOptions sgd) {
  const auto expected = testing::serial_reference(counts, workers, steps, sgd);
  for (size_t rank = 0; rank < finals.size(); ++rank) {
    ASSERT_EQ(finals[rank], expected) << "worker " << rank;
  }
}

TEST(WorkerJob, ColocatedServersMatchSerial) {
  const std::vector<size_t> counts = {100, 10, 33, 1};
  const model::SgdOptions sgd{0.9, 0.001};
  for (int colocated : {1, 2, 3}) {
    const int workers = 3;
    const int64_t steps = 12;
    InprocHub hub(workers);
    std::vector<std::vector<std::vector<float>>> finals(workers);
    testing::run_workers(workers, [&](int rank) {
      std::unique_ptr<Context> ctx = hub.connect(rank, std::chrono::seconds(20));
      WorkerJobOptions options;
      options.colocated = colocated;
      options.sharding = ShardPolicy::kGreedyBySize;
      options.secret = "colocated";
      options.timeout = std::chrono::seconds(20);
      ToyModel model(counts, rank);
      {
        std::unique_ptr<model::ParameterSync> sync = make_worker_sync(options, *ctx, sgd);
        sync->initialize(model.views);
        testing::train(*sync, model, rank, 0, steps);
        // Destroying it says BYE and, on a hosting worker, waits for the others' BYEs.
      }
      finals[static_cast<size_t>(rank)] = model.values;
    });
    check_serial(finals, counts, workers, steps, sgd);
  }
}

TEST(WorkerJob, ServersByAddress) {
  const std::vector<size_t> counts = {20, 3};
  const model::SgdOptions sgd{0.5, 0};
  testing::Servers servers(2, "by-address");
  InprocHub hub(2);
  std::vector<std::vector<std::vector<float>>> finals(2);
  testing::run_workers(2, [&](int rank) {
    std::unique_ptr<Context> ctx = hub.connect(rank, std::chrono::seconds(20));
    WorkerJobOptions options;
    options.servers =
        parse_server_list("--ps-servers", servers.addresses[0] + "," + servers.addresses[1]);
    options.secret = "by-address";
    ToyModel model(counts, rank);
    std::unique_ptr<model::ParameterSync> sync = make_worker_sync(options, *ctx, sgd);
    sync->initialize(model.views);
    testing::train(*sync, model, rank, 0, 5);
    finals[static_cast<size_t>(rank)] = model.values;
  });
  check_serial(finals, counts, 2, 5, sgd);
}

TEST(WorkerJob, RejectsBadFlags) {
  EXPECT_THROW(parse_server_list("--ps-servers", "localhost"), Error);
  EXPECT_THROW(parse_server_list("--ps-servers", ","), Error);
  EXPECT_EQ(parse_server_list("--ps-servers", "a:1,b:2").size(), 2u);
  InprocHub hub(1);
  std::unique_ptr<Context> ctx = hub.connect(0);
  WorkerJobOptions neither;
  try {
    make_worker_sync(neither, *ctx, {});
    FAIL() << "no servers accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("--ps-colocate"), std::string::npos);
  }
  WorkerJobOptions too_many;
  too_many.colocated = 2;
  EXPECT_THROW(make_worker_sync(too_many, *ctx, {}), Error);
}

// A server address whose host does not resolve fails at once, naming the server, its place in
// --ps-servers and the host (it used to say only "cannot resolve host 'nohost'").
TEST(WorkerJob, AnUnresolvableServerIsNamedWithItsFlagEntry) {
  const std::vector<size_t> counts = {4};
  testing::Servers servers(1, "unresolvable");
  InprocHub hub(1);
  std::unique_ptr<Context> ctx = hub.connect(0);
  WorkerJobOptions options;
  options.servers =
      parse_server_list("--ps-servers", servers.addresses[0] + ",nohost.invalid:7000");
  options.secret = "unresolvable";
  options.timeout = std::chrono::seconds(5);
  ToyModel model(counts, 0);
  std::unique_ptr<model::ParameterSync> sync = make_worker_sync(options, *ctx, {});
  try {
    sync->initialize(model.views);
    FAIL() << "an unresolvable server was accepted";
  } catch (const Error& error) {
    const std::string text = error.what();
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << text;
    for (const char* part : {"worker 0", "parameter server 1 (nohost.invalid:7000)",
                             "entry 2 of --ps-servers", "cannot resolve host 'nohost.invalid'"}) {
      EXPECT_NE(text.find(part), std::string::npos) << part << " missing from: " << text;
    }
  }
}

}  // namespace
}  // namespace ringd::ps
