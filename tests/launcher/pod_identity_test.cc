// A StatefulSet pod's identity from flags and (a fake) environment: resolve_pod_identity() and how
// resolve_topology() combines it with --rank/--size, mpirun and the rendezvous.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "launcher/launch_plan.h"
#include "launcher/topology.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

EnvLookup fake_env(std::map<std::string, std::string> values) {
  return [values = std::move(values)](const char* name) -> const char* {
    const auto it = values.find(name);
    return it == values.end() ? nullptr : it->second.c_str();
  };
}

std::string error_message(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no ringd::Error thrown";
  return "";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(PodIdentity, FromTheDownwardApiAndTheManifest) {
  const auto env = fake_env({{"POD_NAME", "ringd-2"},
                             {"POD_NAMESPACE", "training"},
                             {"RINGD_REPLICAS", "4"},
                             {"HOSTNAME", "node-a"}});  // hostNetwork: the node's name; ignored
  const PodIdentity pod = resolve_pod_identity({}, env);
  EXPECT_EQ(pod.set_name, "ringd");
  EXPECT_EQ(pod.ordinal, 2);
  EXPECT_EQ(pod.replicas, 4);
  EXPECT_EQ(pod.service, "ringd");
  EXPECT_EQ(pod.namespace_name, "training");
  EXPECT_EQ(pod.cluster_domain, "cluster.local");
  EXPECT_EQ(pod_dns_name(pod, 0), "ringd-0.ringd.training.svc.cluster.local");
  EXPECT_EQ(pod_dns_name(pod, 3), "ringd-3.ringd.training.svc.cluster.local");
}

TEST(PodIdentity, FromTheHostNameAndFlags) {
  TopologyFlags flags;
  flags.replicas = 8;
  flags.service = "workers";
  flags.cluster_domain = "corp.example";
  const PodIdentity pod =
      resolve_pod_identity(flags, fake_env({{"HOSTNAME", "my-job-7.workers.ns.svc"}}));
  EXPECT_EQ(pod.set_name, "my-job");
  EXPECT_EQ(pod.ordinal, 7);
  EXPECT_EQ(pod_dns_name(pod, 1), "my-job-1.workers.default.svc.corp.example");
}

TEST(PodIdentity, BadInputsNameWhatIsWrong) {
  const auto with = [](std::map<std::string, std::string> values) {
    return fake_env(std::move(values));
  };
  EXPECT_CONTAINS(error_message([&] {
                    resolve_pod_identity({}, with({{"POD_NAME", "ringd-1"}}));
                  }),
                  "RINGD_REPLICAS");
  EXPECT_CONTAINS(
      error_message([&] {
        resolve_pod_identity({}, with({{"HOSTNAME", "laptop"}, {"RINGD_REPLICAS", "2"}}));
      }),
      "'laptop' is not <statefulset>-<ordinal>");
  for (const char* bad : {"ringd-", "-3", "ringd-01", "ringd-x", "Ringd-1", "ringd-1a"}) {
    error_message([&] {
      resolve_pod_identity({}, with({{"POD_NAME", bad}, {"RINGD_REPLICAS", "4"}}));
    });
  }
  EXPECT_CONTAINS(
      error_message([&] {
        resolve_pod_identity({}, with({{"POD_NAME", "ringd-4"}, {"RINGD_REPLICAS", "4"}}));
      }),
      "ordinals 0..3");
  for (const char* bad : {"0", "-1", "four", "4x", ""}) {
    if (!*bad) continue;
    EXPECT_CONTAINS(
        error_message([&] {
          resolve_pod_identity({}, with({{"POD_NAME", "r-0"}, {"RINGD_REPLICAS", bad}}));
        }),
        "replicas");
  }
  EXPECT_CONTAINS(error_message([&] {
                    resolve_pod_identity({}, with({{"POD_NAME", "r-0"},
                                                   {"RINGD_REPLICAS", "2"},
                                                   {"POD_NAMESPACE", "Bad_Namespace"}}));
                  }),
                  "namespace");
}

TEST(PodIdentity, AFlagAndAVariableThatDisagreeAreAnError) {
  const auto env = fake_env({{"POD_NAME", "ringd-1"}, {"RINGD_REPLICAS", "4"}});
  TopologyFlags flags;
  flags.replicas = 3;
  EXPECT_CONTAINS(error_message([&] { resolve_pod_identity(flags, env); }),
                  "--replicas 3 disagrees with RINGD_REPLICAS=4");
  flags = {};
  flags.pod_name = "ringd-2";
  EXPECT_CONTAINS(error_message([&] { resolve_pod_identity(flags, env); }),
                  "--pod-name ringd-2 disagrees with POD_NAME=ringd-1");
  flags.pod_name = "ringd-1";
  flags.replicas = 4;
  EXPECT_EQ(resolve_pod_identity(flags, env).ordinal, 1);  // agreeing is fine
}

TEST(PodIdentity, StandaloneTopologyIsOrdinalOfReplicasWithRendezvousAtPodZero) {
  const auto env = fake_env({{"POD_NAME", "ringd-3"}, {"RINGD_REPLICAS", "4"}});
  const Topology t = resolve_topology({}, env, true);
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.size, 4);
  EXPECT_EQ(t.transport, "tcp");
  EXPECT_EQ(t.rendezvous_host, "ringd-0.ringd.default.svc.cluster.local");
  EXPECT_EQ(t.rendezvous_port, kDefaultRendezvousPort);

  TopologyFlags flags;
  flags.rank = 3;
  flags.size = 4;
  flags.rendezvous = "10.0.0.1:7000";
  const Topology explicit_rendezvous = resolve_topology(flags, env, true);
  EXPECT_EQ(explicit_rendezvous.rendezvous_host, "10.0.0.1");

  flags.rank = 2;
  EXPECT_CONTAINS(error_message([&] { resolve_topology(flags, env, true); }),
                  "--rank 2 disagrees with pod ringd-3");
  flags.rank = 3;
  flags.size = 5;
  EXPECT_CONTAINS(error_message([&] { resolve_topology(flags, env, true); }), "--size 5 disagrees");
}

TEST(PodIdentity, UnderMpirunOpenMpiDecidesTheRank) {
  // Two slots per pod: rank 5 runs on pod ringd-2. The pod is resolved only when asked for.
  const auto env = fake_env({{"OMPI_COMM_WORLD_RANK", "5"},
                             {"OMPI_COMM_WORLD_SIZE", "8"},
                             {"POD_NAME", "ringd-2"},
                             {"RINGD_REPLICAS", "4"}});
  const Topology t = resolve_topology({}, env, true);
  EXPECT_EQ(t.rank, 5);
  EXPECT_EQ(t.size, 8);
  EXPECT_EQ(t.pod.ordinal, -1);
  TopologyFlags flags;
  flags.replicas = 4;
  EXPECT_EQ(resolve_topology(flags, env, true).pod.ordinal, 2);
}

TEST(PodIdentity, HostfileListsEveryPodInOrdinalOrder) {
  PodIdentity pod;
  pod.set_name = "ringd";
  pod.replicas = 3;
  pod.service = "svc";
  pod.namespace_name = "ns";
  pod.cluster_domain = "cluster.local";
  EXPECT_EQ(hostfile_text(pod, 1),
            "ringd-0.svc.ns.svc.cluster.local slots=1\n"
            "ringd-1.svc.ns.svc.cluster.local slots=1\n"
            "ringd-2.svc.ns.svc.cluster.local slots=1\n");
  EXPECT_EQ(hostfile_text(pod, 4).substr(0, 42), "ringd-0.svc.ns.svc.cluster.local slots=4\nr");
}

}  // namespace
}  // namespace ringd::launcher
