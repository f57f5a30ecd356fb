// A StatefulSet pod's identity from flags and (a fake) environment: resolve_pod_identity() and how
// resolve_topology() combines it with --rank/--size, mpirun and the rendezvous; `ringd agent`
// refusing a malformed explicit pod name and answering /readyz only once its identity resolved.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli/pod_commands.h"
#include "common/tunables.h"
#include "job/topology.h"
#include "launcher/launch_plan.h"
#include "net/socket.h"
#include "ringd/error.h"
#include "testing/fake_env.h"

namespace ringd::job {
namespace {

using testing::fake_env;

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

TEST(PodIdentity, AnIndexedJobsPodIsItsIndex) {
  // k8s/components/indexed-job: pods named <job>-<index>-<random>, JOB_COMPLETION_INDEX set.
  const auto env = fake_env({{"POD_NAME", "job1-ringd-2-x7k9q"},
                             {"JOB_COMPLETION_INDEX", "2"},
                             {"RINGD_REPLICAS", "4"},
                             {"RINGD_SERVICE", "job1-ringd"}});
  const PodIdentity pod = resolve_pod_identity({}, env);
  EXPECT_EQ(pod.set_name, "job1-ringd");
  EXPECT_EQ(pod.ordinal, 2);
  EXPECT_EQ(pod_dns_name(pod, 0), "job1-ringd-0.job1-ringd.default.svc.cluster.local");
  // The host name (<job>-<index>) works as well.
  EXPECT_EQ(resolve_pod_identity({}, fake_env({{"HOSTNAME", "ringd-3"},
                                               {"JOB_COMPLETION_INDEX", "3"},
                                               {"RINGD_REPLICAS", "4"}}))
                .ordinal,
            3);
  EXPECT_CONTAINS(
      error_message([] {
        resolve_pod_identity({}, fake_env({{"POD_NAME", "ringd-1-abcde"},
                                           {"JOB_COMPLETION_INDEX", "2"},
                                           {"RINGD_REPLICAS", "4"}}));
      }),
      "pod ringd-1-abcde of an Indexed Job (JOB_COMPLETION_INDEX=2) is not named <job>-2");
  EXPECT_CONTAINS(error_message([] {
                    resolve_pod_identity({}, fake_env({{"POD_NAME", "ringd-1-abcde"},
                                                       {"JOB_COMPLETION_INDEX", "one"},
                                                       {"RINGD_REPLICAS", "4"}}));
                  }),
                  "JOB_COMPLETION_INDEX 'one' is not a whole number");
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
  EXPECT_EQ(launcher::hostfile_text(pod, 1),
            "ringd-0.svc.ns.svc.cluster.local slots=1\n"
            "ringd-1.svc.ns.svc.cluster.local slots=1\n"
            "ringd-2.svc.ns.svc.cluster.local slots=1\n");
  EXPECT_EQ(launcher::hostfile_text(pod, 4).substr(0, 42),
            "ringd-0.svc.ns.svc.cluster.local slots=4\nr");
}

// `ringd agent` (run_agent_command) in a child process of this test, with `variables` set
// ("NAME=" unsets NAME) and its stderr readable from `stderr_fd`; SIGALRM ends it after 20 s.
struct AgentChild {
  pid_t pid = -1;
  int stderr_fd = -1;
  std::string output;

  AgentChild(std::vector<std::string> args, const std::map<std::string, std::string>& variables) {
    (void)ringd::tunables();  // read before the fork, with the job secret set (main's initialiser)
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    std::fflush(stdout);  // else the child's copy of gtest's buffered output is printed again
    pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::alarm(20);
      for (const auto& [name, value] : variables) {
        if (value.empty()) {
          ::unsetenv(name.c_str());
        } else {
          ::setenv(name.c_str(), value.c_str(), 1);
        }
      }
      args.insert(args.begin(), {"ringd", "agent"});
      std::vector<const char*> argv;
      for (const std::string& arg : args) argv.push_back(arg.c_str());
      std::_Exit(cli::run_agent_command(static_cast<int>(argv.size()), argv.data()));
    }
    ::close(fds[1]);
    stderr_fd = fds[0];
  }
  ~AgentChild() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    ::close(stderr_fd);
  }
  // Reads stderr until `text` appears or it ends (false then), within 10 s.
  bool read_until(const std::string& text) {
    const auto deadline = net::Clock::now() + std::chrono::seconds(10);
    char buffer[1024];
    while (output.find(text) == std::string::npos) {
      pollfd entry{stderr_fd, POLLIN, 0};
      if (::poll(&entry, 1, static_cast<int>(net::remaining_ms(deadline))) <= 0) return false;
      const ssize_t got = ::read(stderr_fd, buffer, sizeof(buffer));
      if (got <= 0) return false;
      output.append(buffer, static_cast<size_t>(got));
    }
    return true;
  }
  // Waits for the exit; the exit code, or 128 + the signal that ended it.
  int wait() {
    read_until("\x01");  // to the end of its output
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

const bool kJobSecretSet = ::setenv("RINGD_JOB_SECRET", "pod-identity-test-secret", 1) == 0;

const std::map<std::string, std::string> kNoIdentity = {
    {"POD_NAME", ""}, {"RINGD_REPLICAS", ""}, {"HOSTNAME", "laptop"}};

// Issue 15, item 4: an explicit --pod-name that is not <set>-<ordinal> was silently replaced by
// the host name. It is a usage error (exit 2) naming the flag and the expected form; so is a
// malformed POD_NAME. Only an absent name falls back (below).
TEST(AgentIdentity, AMalformedExplicitPodNameIsAnError) {
  ASSERT_TRUE(kJobSecretSet);
  for (const auto& [args, variables] :
       std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>>{
           {{"--pod-name", "laptop"}, kNoIdentity},
           {{"--pod-name", "ringd_1"}, {{"POD_NAME", ""}, {"RINGD_REPLICAS", "4"}}},
           {{}, {{"POD_NAME", "web-x"}, {"RINGD_REPLICAS", "4"}}}}) {
    AgentChild agent({"--bind", "127.0.0.1", "--exec-port", "0", "--http-port", "0",
                      args.empty() ? "--stop-grace" : args[0], args.empty() ? "1" : args[1]},
                     variables);
    EXPECT_EQ(agent.wait(), 2) << agent.output;
    EXPECT_NE(agent.output.find(args.empty() ? "POD_NAME" : "--pod-name"), std::string::npos)
        << agent.output;
    EXPECT_NE(agent.output.find("<statefulset>-<ordinal>"), std::string::npos) << agent.output;
  }
}

// GET `path` on 127.0.0.1:`port`: the status line and the body.
std::string http_get(uint16_t port, const std::string& path) {
  int error = 0;
  const auto deadline = net::Clock::now() + std::chrono::seconds(5);
  net::Fd fd = net::connect_to(net::Endpoint{"127.0.0.1", port}, {}, deadline, &error);
  const std::string request = "GET " + path + " HTTP/1.1\r\n\r\n";
  net::send_all(fd.get(), request.data(), request.size(), deadline, &error);
  std::string reply;
  char byte = 0;
  while (net::recv_exact(fd.get(), &byte, 1, deadline, &error) == net::IoStatus::kOk) reply += byte;
  return reply;
}

// docs/launcher.md: /readyz answers 200 once the exec service listens and the identity resolved.
// Without an identity (no pod name, no replicas) the agent still serves /healthz and /metrics, but
// /readyz answers 503 saying why; it answered 200 regardless.
TEST(AgentIdentity, ReadyzWaitsForTheIdentity) {
  ASSERT_TRUE(kJobSecretSet);
  for (const bool resolved : {false, true}) {
    AgentChild agent({"--bind", "127.0.0.1", "--exec-port", "0", "--http-port", "0"},
                     resolved ? std::map<std::string, std::string>{{"POD_NAME", "ringd-1"},
                                                                   {"RINGD_REPLICAS", "2"}}
                              : kNoIdentity);
    ASSERT_TRUE(agent.read_until("HTTP on 127.0.0.1:")) << agent.output;
    ASSERT_TRUE(agent.read_until("\n")) << agent.output;
    const size_t at = agent.output.find("HTTP on 127.0.0.1:") + 18;
    const uint16_t port = static_cast<uint16_t>(std::atoi(agent.output.c_str() + at));
    EXPECT_EQ(http_get(port, "/healthz").rfind("HTTP/1.0 200", 0), 0u);
    const std::string ready = http_get(port, "/readyz");
    if (resolved) {
      EXPECT_EQ(ready.rfind("HTTP/1.0 200", 0), 0u) << ready;
    } else {
      EXPECT_EQ(ready.rfind("HTTP/1.0 503", 0), 0u) << ready;
      EXPECT_NE(ready.find("identity"), std::string::npos) << ready;
      EXPECT_NE(ready.find("RINGD_REPLICAS"), std::string::npos) << ready;  // the reason
    }
    ::kill(agent.pid, SIGTERM);
    EXPECT_EQ(agent.wait(), 0) << agent.output;
  }
}

}  // namespace
}  // namespace ringd::job
