// The commands that run ringd inside a Kubernetes StatefulSet (docs/launcher.md):
//   ringd agent      every pod's long-running process (agent_command.cc)
//   ringd exec       Open MPI's rsh agent, talking to another pod's agent (agent_command.cc)
//   ringd hostfile   wait for the pods, write mpirun's hostfile (launch_command.cc)
//   ringd launch     ... then run mpirun and mark the job done (launch_command.cc)
//   ringd status     how launch ended, from its marker or failure record (launch_command.cc)
// cli.cc hands a command line starting with one of these words over to run_pod_command().
#pragma once

namespace ringd::cli {

bool is_pod_command(int argc, const char* const* argv);
int run_pod_command(int argc, const char* const* argv);

int run_agent_command(int argc, const char* const* argv);
int run_exec_command(int argc, const char* const* argv);
int run_hostfile_command(int argc, const char* const* argv);
int run_launch_command(int argc, const char* const* argv);
int run_status_command(int argc, const char* const* argv);

// Exit codes of `ringd launch` and `ringd hostfile` (the table in docs/launcher.md).
enum LaunchExit : int {
  kLaunchOk = 0,
  kLaunchTrainingFailed = 1,
  kLaunchUsage = 2,
  kLaunchPeersNotReady = 3,
  kLaunchPathUnusable = 4,
  kLaunchNoMpirun = 5,
  kLaunchRestartsSpent = 6,  // started --max-restarts + 1 times already (an earlier launch's count)
  kStatusNotFinished = 7,    // `ringd status`: neither the marker nor a failure record (yet)
};

// `ringd exec`'s own failures (the remote command's exit code is passed through otherwise).
constexpr int kExecFailed = 255;

}  // namespace ringd::cli
