// The pod agent's machinery (`ringd agent`, whose flags and main are src/cli/agent_command.cc):
//
//   /healthz /readyz /metrics  an HTTP server (http_server.h); /metrics adds the training's
//                              metrics file to the agent's own counters
//   exec service               ExecServer (exec_server.h): mpirun's remote shell into this pod
//   ringd launch               on ordinal 0 with launch arguments, a child process watched to its
//                              end (with exit_with_launch, the agent then exits with its code)
//   orphans                    as PID 1 (a child subreaper anywhere) every orphaned process of
//                              its jobs is reaped, on SIGCHLD and once a second
//   SIGTERM, SIGINT            the job stopped in order: launch, exec commands and orphans get
//                              SIGTERM, then SIGKILL after stop_grace
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ringd::launcher {

struct AgentOptions {
  std::string name;  // the pod ("ringd-0"), in every log line
  std::string bind = "0.0.0.0";
  uint16_t exec_port = 0;  // 0: any free port (printed at start)
  uint16_t http_port = 0;
  std::string secret;              // the job secret the exec service authenticates with
  std::vector<std::string> allow;  // programs allowed besides default_allowed_programs()
  std::string metrics_file;        // the training's Prometheus text, appended to /metrics
  std::string build_info_labels;   // ringd_build_info's labels (version, backends)
  std::string not_ready;           // non-empty: /readyz answers 503 with this reason
  bool run_launch = false;         // start `ringd launch <launch_args>` (ordinal 0)
  std::vector<std::string> launch_args;
  bool exit_with_launch = false;  // exit with launch's exit code instead of serving on
  std::chrono::milliseconds stop_grace{20000};
};

// Serves until SIGTERM or SIGINT (or, with exit_with_launch, until launch ends), then stops the
// job within stop_grace; returns the agent's exit code. Throws ringd::Error when a port cannot be
// opened or launch cannot be started.
int run_agent(const AgentOptions& options);

}  // namespace ringd::launcher
