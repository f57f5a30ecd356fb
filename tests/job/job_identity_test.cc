// resolve_job_identity(): which job a rank belongs to, from its launcher's environment, and
// join_job(): a rank of one job refused by the store of another, naming both (issue 35, item 5).
#include <gtest/gtest.h>

#include <set>

#include "job/topology.h"
#include "rendezvous/job_membership.h"
#include "ringd/error.h"
#include "ringd/store.h"
#include "testing/fake_env.h"

namespace ringd::job {
namespace {

using testing::fake_env;

Topology torchrun_rank() {
  Topology topology;
  topology.under_torchrun = true;
  return topology;
}

TEST(JobIdentity, TheExplicitIdComesFirst) {
  Topology topology = torchrun_rank();
  const JobIdentity identity = resolve_job_identity(
      topology, fake_env({{"RINGD_JOB_ID", "train-7"}, {"TORCHELASTIC_RUN_ID", "5c1f"}}), "k");
  EXPECT_EQ(identity.source, "RINGD_JOB_ID=train-7");
  EXPECT_EQ(identity.id.size(), 32u);
  EXPECT_EQ(identity.id.find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(JobIdentity, EachLauncherSaysWhichJob) {
  EXPECT_EQ(
      resolve_job_identity(torchrun_rank(), fake_env({{"TORCHELASTIC_RUN_ID", "5c1f"}}), "").source,
      "torchrun run 5c1f");
  Topology mpirun;
  mpirun.under_mpirun = true;
  EXPECT_EQ(
      resolve_job_identity(mpirun, fake_env({{"OMPI_MCA_ess_base_jobid", "358350849"}}), "").source,
      "mpirun job 358350849");
  Topology pod;
  pod.pod.set_name = "ringd";
  pod.pod.ordinal = 2;
  pod.pod.namespace_name = "ml";
  EXPECT_EQ(resolve_job_identity(pod, fake_env({}), "").source, "StatefulSet ml/ringd");
  EXPECT_EQ(resolve_job_identity(Topology{}, fake_env({}), "secret").source, "the job secret");
}

TEST(JobIdentity, TorchrunsDefaultRunIdIdentifiesNothing) {
  // torchrun without --rdzv-id gives every job the run id "none".
  const JobIdentity identity =
      resolve_job_identity(torchrun_rank(), fake_env({{"TORCHELASTIC_RUN_ID", "none"}}), "");
  EXPECT_TRUE(identity.id.empty());
  EXPECT_TRUE(identity.source.empty());
}

TEST(JobIdentity, NothingKnownIsNoIdentity) {
  const JobIdentity identity = resolve_job_identity(Topology{}, fake_env({}), "");
  EXPECT_TRUE(identity.id.empty());
}

TEST(JobIdentity, TheSameSourceGivesTheSameIdAndOthersDiffer) {
  std::set<std::string> ids;
  for (const char* job : {"a", "b", "train-7", "train-8"}) {
    const std::string id =
        resolve_job_identity(Topology{}, fake_env({{"RINGD_JOB_ID", job}}), "").id;
    EXPECT_EQ(id, resolve_job_identity(Topology{}, fake_env({{"RINGD_JOB_ID", job}}), "").id);
    ids.insert(id);
  }
  ids.insert(resolve_job_identity(Topology{}, fake_env({}), "secret one").id);
  ids.insert(resolve_job_identity(Topology{}, fake_env({}), "secret two").id);
  EXPECT_EQ(ids.size(), 6u);
  // The secret's id is keyed: it is not the id of a job named after the secret.
  EXPECT_NE(resolve_job_identity(Topology{}, fake_env({}), "x").id,
            resolve_job_identity(Topology{}, fake_env({{"RINGD_JOB_ID", "x"}}), "").id);
}

TEST(JoinJob, ARankOfAnotherJobIsRefusedNamingBoth) {
  MemoryStore store;
  const std::string a(32, 'a');
  const std::string b(32, 'b');
  EXPECT_EQ(rendezvous::join_job(store, 0, 4, a, "RINGD_JOB_ID=job-a"), a);
  EXPECT_EQ(rendezvous::join_job(store, 2, 4, a, "RINGD_JOB_ID=job-a"), a);
  try {
    rendezvous::join_job(store, 1, 4, b, "torchrun run 5c1f");
    FAIL() << "a rank of another job joined";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kMismatch);
    const std::string message = error.what();
    EXPECT_NE(message.find(b + " (torchrun run 5c1f)"), std::string::npos) << message;
    EXPECT_NE(message.find(a + " (RINGD_JOB_ID=job-a)"), std::string::npos) << message;
  }
  // A rank that knows no identity joins the store's job, whoever made it.
  EXPECT_EQ(rendezvous::join_job(store, 3, 4, ""), a);
}

TEST(JoinJob, AnotherSizeIsRefusedNamingTheJob) {
  MemoryStore store;
  rendezvous::join_job(store, 0, 4, std::string(32, 'a'), "StatefulSet ml/ringd");
  try {
    rendezvous::join_job(store, 1, 2, "");
    FAIL() << "a rank of another size joined";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("(StatefulSet ml/ringd) on this rendezvous store has "
                        "4 ranks, this rank was started with 2"),
              std::string::npos)
        << error.what();
  }
}

TEST(JoinJob, RecordsOfOlderVersionsHaveNoSource) {
  MemoryStore store;
  std::vector<uint8_t> existing;
  store.add("ringd/job", to_bytes(std::string(32, 'c') + " 2"), &existing);
  EXPECT_EQ(rendezvous::join_job(store, 1, 2, ""), std::string(32, 'c'));
  EXPECT_THROW(rendezvous::join_job(store, 1, 3, ""), Error);
}

}  // namespace
}  // namespace ringd::job
