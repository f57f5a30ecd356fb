// ringd launch's decisions without pods: the readiness wait's back-off and bound, the mpirun
// command line, forwarded variables, the completion marker, what a restart runs and its count.
#include "launcher/launch_plan.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "ringd/error.h"

namespace ringd::launcher {
namespace {

using std::chrono::milliseconds;

// A clock that only moves when the code under test sleeps.
struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  std::vector<milliseconds> sleeps;
  std::function<std::chrono::steady_clock::time_point()> now_fn() {
    return [this] { return now; };
  }
  std::function<void(milliseconds)> sleep_fn() {
    return [this](milliseconds d) {
      sleeps.push_back(d);
      now += d;
    };
  }
};

TEST(LaunchPlan, BackoffDoublesFrom100msTo2s) {
  EXPECT_EQ(backoff_delay(0), milliseconds(100));
  EXPECT_EQ(backoff_delay(1), milliseconds(200));
  EXPECT_EQ(backoff_delay(4), milliseconds(1600));
  EXPECT_EQ(backoff_delay(5), milliseconds(2000));
  EXPECT_EQ(backoff_delay(1000), milliseconds(2000));
}

TEST(LaunchPlan, WaitGivesUpAtTheBoundAndListsTheMissingPods) {
  FakeClock clock;
  std::map<std::string, int> asked;
  const auto probe = [&](const std::string& host) -> std::string {
    ++asked[host];
    if (host == "ringd-2") return "does not resolve";
    if (host == "ringd-3") return "connection refused";
    return "";
  };
  const PeerWait wait = wait_for_peers({"ringd-0", "ringd-1", "ringd-2", "ringd-3"}, probe,
                                       milliseconds(10000), clock.now_fn(), clock.sleep_fn());
  EXPECT_FALSE(wait.ready);
  EXPECT_EQ(wait.missing, (std::vector<std::string>{"ringd-2 (does not resolve)",
                                                    "ringd-3 (connection refused)"}));
  // Never sleeps past the bound, and stops right at it.
  EXPECT_EQ(wait.waited, milliseconds(10000));
  EXPECT_EQ(clock.sleeps.front(), milliseconds(100));
  for (const milliseconds d : clock.sleeps) EXPECT_LE(d, milliseconds(2000));
  // 100+200+400+800+1600 = 3100, then 2000 x 3 = 9100, then the last 900 ms: 9 sleeps, 10 rounds.
  EXPECT_EQ(clock.sleeps.size(), 9u);
  EXPECT_EQ(wait.rounds, 10);
  EXPECT_EQ(asked["ringd-0"], 1);  // ready pods are not asked again
  EXPECT_EQ(asked["ringd-2"], 10);
}

TEST(LaunchPlan, WaitEndsAsSoonAsTheLastPodAnswers) {
  FakeClock clock;
  int round = 0;
  const auto probe = [&](const std::string& host) -> std::string {
    if (host != "ringd-1") return "";
    return ++round < 4 ? "connection refused" : "";
  };
  const PeerWait wait = wait_for_peers({"ringd-0", "ringd-1"}, probe, milliseconds(300000),
                                       clock.now_fn(), clock.sleep_fn());
  EXPECT_TRUE(wait.ready);
  EXPECT_TRUE(wait.missing.empty());
  EXPECT_EQ(wait.waited, milliseconds(100 + 200 + 400));
}

TEST(LaunchPlan, ZeroTimeoutProbesOnce) {
  FakeClock clock;
  const PeerWait wait = wait_for_peers(
      {"a"}, [](const std::string&) { return std::string("down"); }, milliseconds(0),
      clock.now_fn(), clock.sleep_fn());
  EXPECT_FALSE(wait.ready);
  EXPECT_EQ(wait.rounds, 1);
  EXPECT_TRUE(clock.sleeps.empty());
}

bool contains_sequence(const std::vector<std::string>& argv, const std::vector<std::string>& seq) {
  return std::search(argv.begin(), argv.end(), seq.begin(), seq.end()) != argv.end();
}

TEST(LaunchPlan, MpirunGetsAShellWhenTheContainerSetsNone) {
  EXPECT_EQ(mpirun_environment({"PATH=/bin", "RINGD_TIMEOUT=60"}),
            (std::vector<std::string>{"PATH=/bin", "RINGD_TIMEOUT=60", "SHELL=/bin/sh"}));
  EXPECT_EQ(mpirun_environment({"SHELL=/bin/zsh", "PATH=/bin"}),
            (std::vector<std::string>{"SHELL=/bin/zsh", "PATH=/bin"}));
}

TEST(LaunchPlan, MpirunCommandLine) {
  MpirunPlan plan;
  plan.ringd_path = "/usr/local/bin/ringd";
  plan.hostfile = "/var/lib/ringd/hostfile";
  plan.ranks = 4;
  plan.command = {"ringd", "train", "--epochs", "1"};
  plan.forward_env = {"RINGD_TIMEOUT"};
  std::vector<std::string> argv = mpirun_argv(plan);
  EXPECT_EQ(argv[0], "mpirun");
  EXPECT_TRUE(contains_sequence(argv, {"--hostfile", "/var/lib/ringd/hostfile", "-np", "4"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "plm_rsh_agent", "/usr/local/bin/ringd exec"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "plm_rsh_no_tree_spawn", "1"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "orte_leave_session_attached", "1"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "orte_keep_fqdn_hostnames", "1"}));
  EXPECT_TRUE(contains_sequence(argv, {"-x", "RINGD_TIMEOUT"}));
  EXPECT_TRUE(contains_sequence(argv, {"ringd", "train", "--epochs", "1"}));
  EXPECT_EQ(argv.back(), "1");
  for (const char* absent : {"--allow-run-as-root", "--oversubscribe", "btl_tcp_if_include"}) {
    EXPECT_EQ(std::find(argv.begin(), argv.end(), absent), argv.end()) << absent;
  }

  plan.running_as_root = true;
  plan.oversubscribed = true;
  plan.interface = "eth0";
  plan.extra_args = {"--mca", "btl", "self,tcp"};
  argv = mpirun_argv(plan);
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "mpi_yield_when_idle", "1", "--oversubscribe"}));
  EXPECT_TRUE(contains_sequence(argv, {"--allow-run-as-root"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "btl_tcp_if_include", "eth0"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "oob_tcp_if_include", "eth0"}));
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "btl", "self,tcp", "ringd", "train"}));
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "odls_base_sigkill_timeout"), argv.end());

  plan.sigkill_timeout_s = 10;
  argv = mpirun_argv(plan);
  EXPECT_TRUE(contains_sequence(argv, {"--mca", "odls_base_sigkill_timeout", "10"}));
}

TEST(LaunchPlan, TheJobSecretIsNeverForwarded) {
  EXPECT_EQ(forwarded_variables({"PATH=/bin", "RINGD_TIMEOUT=5", "RINGD_JOB_SECRET=x",
                                 "RINGD_JOB_SECRET_FILE=/s", "RINGD_IFACE=eth0", "XRINGD_A=1"}),
            (std::vector<std::string>{"RINGD_IFACE", "RINGD_TIMEOUT"}));
}

std::string temporary_directory() {
  char pattern[] = "/tmp/ringd-launch-test-XXXXXX";
  const char* made = ::mkdtemp(pattern);
  EXPECT_NE(made, nullptr);
  return made ? made : "/tmp";
}

TEST(LaunchPlan, MarkerRoundTripAndAtomicWrite) {
  const std::string dir = temporary_directory();
  const std::string marker = dir + "/launch.done";
  std::string contents;
  EXPECT_FALSE(read_marker(marker, &contents));
  check_marker_writable(marker);  // leaves nothing behind
  EXPECT_FALSE(read_marker(marker, &contents));
  const std::string record = marker_record({"ringd", "train"}, 4, 1);
  EXPECT_NE(record.find("\"pods\":4"), std::string::npos) << record;
  EXPECT_NE(record.find("\"command\":[\"ringd\",\"train\"]"), std::string::npos) << record;
  write_marker(marker, record);
  ASSERT_TRUE(read_marker(marker, &contents));
  EXPECT_EQ(contents, record);
  EXPECT_EQ(::unlink(marker.c_str()), 0);
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << "temporary files left in " << dir;
}

TEST(LaunchPlan, UnwritableMarkerIsReportedBeforeTraining) {
  try {
    check_marker_writable("/nonexistent-ringd-dir/launch.done");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(error.what()).find("/nonexistent-ringd-dir/"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("--no-marker"), std::string::npos);
  }
  EXPECT_THROW(write_marker("/nonexistent-ringd-dir/launch.done", "x"), Error);
}

TEST(LaunchPlan, ARestartedRingdTrainResumesFromItsCheckpoints) {
  std::string note;
  const std::vector<std::string> train = {
      "/usr/local/bin/ringd",       "train",    "--checkpoint-dir",
      "/var/lib/ringd/checkpoints", "--epochs", "3"};
  std::vector<std::string> expected = train;
  expected.push_back("--resume");
  EXPECT_EQ(restart_command(train, &note), expected);
  EXPECT_EQ(note, "");
  // Already resuming: as it is; --checkpoint-dir=DIR counts too.
  EXPECT_EQ(restart_command(expected, &note), expected);
  EXPECT_EQ(note, "");
  EXPECT_EQ(restart_command({"ringd", "train", "--checkpoint-dir=/c"}, &note),
            (std::vector<std::string>{"ringd", "train", "--checkpoint-dir=/c", "--resume"}));
  // Without checkpoints it can only start over; other programs are run again as they are.
  EXPECT_EQ(restart_command({"ringd", "train", "--epochs", "3"}, &note),
            (std::vector<std::string>{"ringd", "train", "--epochs", "3"}));
  EXPECT_NE(note.find("no --checkpoint-dir"), std::string::npos) << note;
  for (const std::vector<std::string>& other :
       {std::vector<std::string>{"python3", "train.py", "--checkpoint-dir", "/c"},
        std::vector<std::string>{"ringd", "bench", "allreduce"},
        std::vector<std::string>{"notringd", "train", "--checkpoint-dir", "/c"},
        std::vector<std::string>{"train", "--checkpoint-dir", "/c"}}) {
    EXPECT_EQ(restart_command(other, &note), other) << other[0];
    EXPECT_NE(note.find("not a `ringd train` command"), std::string::npos) << note;
  }
}

TEST(LaunchPlan, AFailureRecordCarriesLaunchsExitCode) {
  const std::string dir = temporary_directory();
  const std::string marker = dir + "/launch.done";
  EXPECT_EQ(failure_path(marker), marker + ".failed");
  const std::string record = failure_record(3, {"ringd", "train"}, 4, 1);
  EXPECT_EQ(record_exit_code(record), 3);
  EXPECT_EQ(record_exit_code(marker_record({"ringd", "train"}, 4, 1)), 0);
  for (const char* bad : {"", "not json", "{}", "{\"exit_code\":\"3\"}", "[3]"}) {
    EXPECT_EQ(record_exit_code(bad), -1) << bad;
  }
  write_failure(marker, record);
  std::string read;
  ASSERT_TRUE(read_marker(failure_path(marker), &read));
  EXPECT_EQ(read, record);
  remove_failure(marker);
  EXPECT_FALSE(read_marker(failure_path(marker), &read));
  remove_failure(marker);  // none: nothing to do
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << "temporary files left in " << dir;
}

TEST(LaunchPlan, AttemptsSurviveInAFileAndABadOneCountsZero) {
  const std::string dir = temporary_directory();
  const std::string path = attempts_path(dir + "/launch.done");
  EXPECT_EQ(path, dir + "/launch.done.attempts");
  std::string problem;
  EXPECT_EQ(read_attempts(path, &problem), 0);
  EXPECT_EQ(problem, "");
  write_attempts(path, 3);
  EXPECT_EQ(read_attempts(path, &problem), 3);
  EXPECT_EQ(problem, "");
  for (const char* bad : {"three\n", "-1\n", "\n", "12abc\n"}) {
    std::ofstream(path, std::ios::trunc) << bad;
    EXPECT_EQ(read_attempts(path, &problem), 0) << bad;
    EXPECT_NE(problem.find("does not hold a count"), std::string::npos) << bad;
  }
  EXPECT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << "temporary files left in " << dir;
}

}  // namespace
}  // namespace ringd::launcher
