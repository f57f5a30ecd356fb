// The decisions of `ringd hostfile` and `ringd launch` as functions of their inputs, so each is
// unit-tested without pods: the hostfile's text, the wait for peers (its back-off and bound), the
// mpirun command line, the completion marker, and what a restart runs.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "job/topology.h"

namespace ringd::launcher {

// "<pod 0 DNS name> slots=N\n" ... one line per pod in ordinal order.
std::string hostfile_text(const job::PodIdentity& pod, int slots);

// Back-off between readiness rounds: 100 ms doubling up to 2 s.
std::chrono::milliseconds backoff_delay(int round);

struct PeerWait {
  bool ready = false;
  int rounds = 0;
  std::chrono::milliseconds waited{0};
  // Every pod still missing after the last round, with why: "ringd-2.ringd... (does not resolve)".
  std::vector<std::string> missing;
};

// Probes each host (probe returns "" when ready, else why not) in rounds, sleeping backoff_delay()
// between rounds, until all answered or `timeout` would pass; never sleeps past the bound. Hosts
// that answered once are not asked again. `now` and `sleep` are injectable for tests.
PeerWait wait_for_peers(const std::vector<std::string>& hosts,
                        const std::function<std::string(const std::string&)>& probe,
                        std::chrono::milliseconds timeout,
                        const std::function<std::chrono::steady_clock::time_point()>& now,
                        const std::function<void(std::chrono::milliseconds)>& sleep);

struct MpirunPlan {
  std::string mpirun = "mpirun";
  std::string ringd_path;  // this binary (absolute): the rsh agent is "<ringd_path> exec"
  std::string hostfile;
  int ranks = 1;
  std::string interface;  // empty: let Open MPI choose
  bool oversubscribed = false;
  bool running_as_root = false;
  uint16_t agent_port = 29400;
  std::vector<std::string> extra_args;   // --mpirun-arg, in order, before the command
  std::vector<std::string> forward_env;  // names passed with -x
  std::vector<std::string> command;      // what each rank runs
  // Open MPI's odls_base_sigkill_timeout: how long a rank has between the SIGTERM an orted or
  // mpirun sends when the job ends early and the SIGKILL after it (Open MPI's default is 1 s);
  // `ringd train` uses it to finish its step and write a checkpoint. 0: Open MPI's default.
  int sigkill_timeout_s = 0;
};

std::vector<std::string> mpirun_argv(const MpirunPlan& plan);

// mpirun's environment: `environment` ("NAME=VALUE" entries) with SHELL=/bin/sh added when it is
// missing. Open MPI asks the user's login shell how to word the remote command and falls back to
// $SHELL; the image's user has nologin and a container sets no SHELL, so without it mpirun warns
// "local probe returned unhandled shell:unknown assuming bash" at every start (seen on a real
// cluster, scripts/e2e_k8s.sh).
std::vector<std::string> mpirun_environment(std::vector<std::string> environment);

// Names of RINGD_* variables in `environment` ("NAME=VALUE" entries) that mpirun should forward:
// all but the job secret ones (remote processes inherit the secret from their own pod's agent, and
// -x would carry it through Open MPI's unauthenticated launch channel).
std::vector<std::string> forwarded_variables(const std::vector<std::string>& environment);

// The completion marker: a one-line JSON record written atomically (temporary file, fsync,
// rename) after a successful run. read_marker returns false when there is none, and throws
// ringd::Error naming the path when what is there is not a regular file of at most
// kMaxMarkerBytes (a directory, a FIFO: common/files.h's read_state_file).
constexpr size_t kMaxMarkerBytes = 1 << 20;
bool read_marker(const std::string& path, std::string* contents);
void write_marker(const std::string& path, const std::string& contents);
// Throws ringd::Error(kIo) naming the path when a marker could not be written there later (its
// directory is missing or read-only), so a run is not trained only to fail at the end.
void check_marker_writable(const std::string& path);
std::string marker_record(const std::vector<std::string>& command, int pods, int slots);

// The failure record, MARKER.failed: the same JSON with launch's exit code when it gave up (the
// command failed after its restarts, pods did not come, the budget was spent), for `ringd status`.
// Written atomically; removed when a launch runs the job again.
std::string failure_path(const std::string& marker);
std::string failure_record(int exit_code, const std::vector<std::string>& command, int pods,
                           int slots);
void write_failure(const std::string& marker, const std::string& record);
void remove_failure(const std::string& marker);
// The "exit_code" of a marker or failure record; -1 when the text holds none.
int record_exit_code(const std::string& record);

// Restarts (`ringd launch --max-restarts N`). The attempts file counts how often this job's
// command was started, across launch's own restarts (pod 0's container restarting): launch writes
// it before each start and removes it after a success. A missing or unreadable file counts 0
// (warned by the caller when it exists but does not parse).
std::string attempts_path(const std::string& marker);
int read_attempts(const std::string& path, std::string* problem);
void write_attempts(const std::string& path, int attempts);

// The command to run again after a failure: a `ringd train` command (its program named ringd,
// then "train") with --checkpoint-dir and without --resume gets --resume, so it continues from the
// newest intact checkpoint. Any other command runs again as it is; `note` then says why (empty
// when --resume was added or was already there).
std::vector<std::string> restart_command(const std::vector<std::string>& command,
                                         std::string* note);

}  // namespace ringd::launcher
