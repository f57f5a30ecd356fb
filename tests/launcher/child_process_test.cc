// reap_orphans() and running_orphans(): this process (a child subreaper, like the agent) reaps the
// orphans reparented to it and never a child that a ChildProcess waits for.
#include "launcher/child_process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace ringd::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBound = std::chrono::seconds(20);  // generous: a loaded 2-core machine

class ChildProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(become_child_subreaper()); }
};

std::unique_ptr<ChildProcess> spawn_shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.environment = current_environment();
  return ChildProcess::spawn(options);
}

// Everything the child writes to stdout until it closes it (bounded).
std::string read_stdout(ChildProcess* child) {
  std::string out;
  const Clock::time_point deadline = Clock::now() + kBound;
  while (child->stdout_fd() >= 0 && Clock::now() < deadline) {
    pollfd entry{child->stdout_fd(), POLLIN, 0};
    ::poll(&entry, 1, 100);
    char buffer[256];
    const ssize_t got = ::read(child->stdout_fd(), buffer, sizeof(buffer));
    if (got > 0) out.append(buffer, static_cast<size_t>(got));
    if (got == 0) child->close_stdout();
  }
  return out;
}

// Calls reap_orphans() until it returns `pid` (its wait status) or the bound passes (-1).
int reap_until(pid_t pid) {
  const Clock::time_point deadline = Clock::now() + kBound;
  while (Clock::now() < deadline) {
    for (const ReapedOrphan& orphan : reap_orphans()) {
      if (orphan.pid == pid) return orphan.wait_status;
    }
    ::usleep(1000);  // polling with a deadline, not synchronisation
  }
  return -1;
}

TEST_F(ChildProcessTest, ReapsAnOrphanReparentedHere) {
  // sh starts a grandchild and leaves without waiting for it: the grandchild is reparented to
  // this process, which reaps it with its status. The grandchild exits 3 only when this test
  // closes sh's stdin, after sh has ended: one that ended earlier could be reaped by sh itself
  // (dash collects finished background jobs), never reaching this process. Its stdin is a copy on
  // fd 3 because sh gives a background job /dev/null as fd 0, and its stdout is not sh's pipe.
  auto child = spawn_shell("exec 3<&0; sh -c 'read line <&3; exit 3' >/dev/null 2>&1 & echo $!");
  const std::string printed = read_stdout(child.get());
  ASSERT_TRUE(child->wait_for_exit(kBound));
  EXPECT_EQ(child->exit_code(), 0);
  child->close_stdin();
  const pid_t orphan = static_cast<pid_t>(std::stoi(printed));
  const int status = reap_until(orphan);
  ASSERT_NE(status, -1) << "orphan " << orphan << " was not reaped within the bound";
  EXPECT_EQ(describe_wait_status(status), "exit 3");
  EXPECT_EQ(::waitpid(orphan, nullptr, WNOHANG), -1) << "pid " << orphan << " is still a child";
}

TEST_F(ChildProcessTest, RunningOrphansListsOrphansNotTrackedChildren) {
  // A tracked child that sleeps, and an orphan (sh's background sleep) that sleeps.
  auto tracked = spawn_shell("exec sleep 30");
  auto parent = spawn_shell("sleep 30 >/dev/null 2>&1 & echo $!");
  const pid_t orphan = static_cast<pid_t>(std::stoi(read_stdout(parent.get())));
  ASSERT_TRUE(parent->wait_for_exit(kBound));
  const std::vector<pid_t> running = running_orphans();
  EXPECT_NE(std::find(running.begin(), running.end(), orphan), running.end())
      << "orphan " << orphan << " not listed";
  EXPECT_EQ(std::find(running.begin(), running.end(), tracked->pid()), running.end())
      << "tracked child " << tracked->pid() << " listed as an orphan";
  ASSERT_EQ(::kill(orphan, SIGKILL), 0);
  EXPECT_EQ(describe_wait_status(reap_until(orphan)), "signal 9");
  tracked->terminate(std::chrono::milliseconds(kBound));
  EXPECT_EQ(tracked->describe_status(), "signal 15");
}

TEST_F(ChildProcessTest, TerminateEndsTheSessionsOtherMembersFirstAlsoInOtherGroups) {
  // Like orted and its ranks: the new-session child (sh) starts a process that moves into a
  // process group of its own. terminate() must reach it (a pod's deletion must reach the ranks,
  // not only orted), and before the child itself: sh, still running, sees it end on SIGTERM and
  // says so, then exits 0 without having been signalled.
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c",
                  "python3 -c 'import os, time; os.setpgid(0, 0); print(os.getpid(), flush=True); "
                  "time.sleep(60)' & wait $!; echo \"grandchild ended: $?\""};
  options.environment = current_environment();
  options.new_session = true;
  auto child = ChildProcess::spawn(options);
  std::string printed;
  const Clock::time_point deadline = Clock::now() + kBound;
  while (printed.find('\n') == std::string::npos && Clock::now() < deadline) {
    pollfd entry{child->stdout_fd(), POLLIN, 0};
    ::poll(&entry, 1, 100);
    char buffer[64];
    const ssize_t got = ::read(child->stdout_fd(), buffer, sizeof(buffer));
    if (got > 0) printed.append(buffer, static_cast<size_t>(got));
  }
  ASSERT_NE(printed.find('\n'), std::string::npos) << "the grandchild did not start";
  const pid_t grandchild = static_cast<pid_t>(std::stoi(printed));
  ASSERT_EQ(::getpgid(grandchild), grandchild) << "not in a process group of its own";
  ASSERT_EQ(::getsid(grandchild), child->pid()) << "not in the child's session";
  child->terminate(std::chrono::milliseconds(kBound));
  printed += read_stdout(child.get());
  EXPECT_NE(printed.find("grandchild ended: 143"), std::string::npos) << printed;
  EXPECT_EQ(child->describe_status(), "exit 0") << "sh was signalled before its grandchild ended";
}

TEST_F(ChildProcessTest, ExitFdStaysReadableOnceTheChildEnded) {
  // The agent watches ringd launch's exit_fd() until it has recorded the end, also when exited()
  // turned true before its poll saw the fd: the fd must say so on every later poll, not once.
  auto child = spawn_shell("exit 3");
  ASSERT_TRUE(child->wait_for_exit(kBound));
  ASSERT_TRUE(child->exited());
  for (int look = 0; look < 3; ++look) {
    pollfd entry{child->exit_fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&entry, 1, 0), 1) << "look " << look;
    EXPECT_TRUE(entry.revents & POLLIN) << "look " << look;
  }
  EXPECT_EQ(child->exit_code(), 3);
}

TEST_F(ChildProcessTest, NeverTakesATrackedChildsExitStatus) {
  // Children that end together (each on its stdin's end), each with its own code, while this
  // thread reaps orphans as fast as it can: every status must still reach its ChildProcess. A
  // reaper that took any zombie child (waitpid(-1), as a naive PID 1 does) leaves some with
  // status 0 here, or reaped by the wrong hand.
  constexpr int kChildren = 8;
  for (int round = 0; round < 10; ++round) {
    std::vector<std::unique_ptr<ChildProcess>> children;
    for (int i = 0; i < kChildren; ++i) {
      children.push_back(spawn_shell("read line; exit " + std::to_string(10 + i)));
    }
    for (auto& child : children) child->close_stdin();
    const Clock::time_point deadline = Clock::now() + kBound;
    const auto all_exited = [&children] {
      return std::all_of(children.begin(), children.end(),
                         [](const auto& child) { return child->exited(); });
    };
    while (!all_exited() && Clock::now() < deadline) {
      // Only the tracked children count: an orphan another test left behind may be reaped here.
      for (const ReapedOrphan& orphan : reap_orphans()) {
        for (const auto& child : children) {
          if (child->pid() == orphan.pid) {
            ADD_FAILURE() << "reap_orphans() took tracked child " << orphan.pid << "'s status";
          }
        }
      }
    }
    for (int i = 0; i < kChildren; ++i) {
      ASSERT_TRUE(children[i]->wait_for_exit(kBound));
      EXPECT_EQ(children[i]->exit_code(), 10 + i) << "round " << round << ", child " << i;
    }
  }
}

}  // namespace
}  // namespace ringd::launcher
