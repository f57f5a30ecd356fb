// `ringd hostfile` and `ringd launch` (pod 0): wait for every pod's agent, write mpirun's hostfile,
// run mpirun with Open MPI's rsh agent set to `ringd exec`, forward SIGTERM/SIGINT, and mark the
// job done so that a restarted pod 0 does not train again. Exit codes: pod_commands.h.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "cli/flag_checks.h"
#include "cli/pod_commands.h"
#include "cli/pod_flags.h"
#include "common/files.h"
#include "common/tunables.h"
#include "launcher/child_process.h"
#include "launcher/exec_client.h"
#include "launcher/launch_plan.h"
#include "launcher/process_self.h"
#include "launcher/supervise.h"
#include "ringd/error.h"

namespace ringd::cli {

// The pod machinery these commands drive (src/launcher).
using launcher::attempts_path;
using launcher::check_marker_writable;
using launcher::current_environment;
using launcher::failure_path;
using launcher::failure_record;
using launcher::forwarded_variables;
using launcher::hostfile_text;
using launcher::marker_record;
using launcher::mpirun_argv;
using launcher::mpirun_environment;
using launcher::MpirunPlan;
using launcher::pause_unless_signalled;
using launcher::PeerWait;
using launcher::ping_agent;
using launcher::read_attempts;
using launcher::read_marker;
using launcher::record_exit_code;
using launcher::remove_failure;
using launcher::restart_command;
using launcher::run_forwarding_signals;
using launcher::self_path;
using launcher::SpawnOptions;
using launcher::wait_for_peers;
using launcher::write_attempts;
using launcher::write_failure;
using launcher::write_marker;

namespace {

constexpr const char* kLaunchFooter = R"(
Steps: (1) a completion marker from an earlier run ends here with exit 0; (2) wait until every
pod's DNS name resolves and its agent answers an authenticated ping; (3) write the hostfile;
(4) mpirun --hostfile H -np replicas*slots --mca plm_rsh_agent "<ringd> exec" ... COMMAND,
forwarding SIGTERM/SIGINT; (5) on success write the marker.

Restarts (--max-restarts N): when mpirun fails (a pod lost, a rank killed), launch waits
--restart-delay, then for every pod again (--wait-timeout), and runs the command again; a
`ringd train` command with --checkpoint-dir gets --resume, so it continues from the newest intact
checkpoint. A restart whose pods do not come back within --wait-timeout counts as a failed start.
The starts are counted in MARKER.attempts, so that a restarted pod 0 keeps the count.

Exit codes: 0 done (or already done), 1 mpirun failed (after the restarts), 2 bad command line or
identity, 3 peers not ready in time, 4 marker/hostfile path not writable, 5 mpirun not found,
6 restart budget already spent by earlier starts, 128+N signal N. See docs/launcher.md.
)";

struct LaunchFlags {
  std::string hostfile = "/var/lib/ringd/hostfile";
  int slots = 1;
  double wait_timeout_s = 300;
  uint16_t agent_port = 0;
  std::string marker = "/var/lib/ringd/launch.done";
  bool no_marker = false;
  std::string interface;
  bool oversubscribed = false;
  std::string mpirun = "mpirun";
  std::vector<std::string> mpirun_args;
  int max_restarts = 0;
  double restart_delay_s = 5;
  int sigkill_timeout_s = 3;
  job::TopologyFlags identity;
};

void add_hostfile_options(CLI::App* app, LaunchFlags* flags) {
  app->add_option("--hostfile", flags->hostfile,
                  "where to write mpirun's hostfile (default /var/lib/ringd/hostfile)");
  app->add_option("--slots", flags->slots, "ranks per pod (default 1)")->check(CLI::Range(1, 4096));
  app->add_option("--wait-timeout", flags->wait_timeout_s,
                  "seconds to wait for every pod's agent (default 300)")
      ->check(cli::finite_range(0, kMaxSeconds));
  app->add_option("--exec-port", flags->agent_port,
                  "the agents' exec port (default RINGD_AGENT_PORT, 29400)")
      ->check(CLI::Range(1, 65535));
  add_identity_options(app, &flags->identity);
}

// Identity, secret and ports; throws with a message naming what is wrong.
struct Job {
  job::PodIdentity pod;
  std::string secret;
  std::vector<std::string> hosts;
};

Job resolve_job(LaunchFlags* flags) {
  Job job;
  const Tunables& t = tunables();
  job.secret = t.job_secret;
  if (flags->agent_port == 0) flags->agent_port = static_cast<uint16_t>(t.agent_port);
  if (flags->interface.empty()) flags->interface = t.interface;
  if (job.secret.empty()) {
    RINGD_THROW(kInvalidArgument,
                "no job secret: set RINGD_JOB_SECRET or RINGD_JOB_SECRET_FILE (the agents accept "
                "only callers that prove it)");
  }
  job.pod = job::resolve_pod_identity(flags->identity, job::process_environment());
  for (int i = 0; i < job.pod.replicas; ++i) job.hosts.push_back(job::pod_dns_name(job.pod, i));
  return job;
}

// Steps 2 and 3; returns an exit code (kLaunchOk to go on).
int wait_and_write_hostfile(const LaunchFlags& flags, const Job& job) {
  std::fprintf(stderr, "ringd launch: waiting up to %.0f s for %d pods' agents (%s ... %s)\n",
               flags.wait_timeout_s, job.pod.replicas, job.hosts.front().c_str(),
               job.hosts.back().c_str());
  const auto probe = [&](const std::string& host) {
    return ping_agent(host, flags.agent_port, job.secret, std::chrono::seconds(2));
  };
  const PeerWait wait = wait_for_peers(
      job.hosts, probe,
      std::chrono::milliseconds(static_cast<int64_t>(flags.wait_timeout_s * 1000)),
      [] { return std::chrono::steady_clock::now(); },
      [](std::chrono::milliseconds delay) { std::this_thread::sleep_for(delay); });
  if (!wait.ready) {
    std::fprintf(stderr,
                 "ringd launch: error: %zu of %d pods not ready after %.1f s (%d rounds):\n",
                 wait.missing.size(), job.pod.replicas, wait.waited.count() / 1000.0, wait.rounds);
    for (const std::string& missing : wait.missing) std::fprintf(stderr, "  %s\n", missing.c_str());
    return kLaunchPeersNotReady;
  }
  std::fprintf(stderr, "ringd launch: all %d agents answered after %.1f s\n", job.pod.replicas,
               wait.waited.count() / 1000.0);
  try {
    write_file_atomically(flags.hostfile, hostfile_text(job.pod, flags.slots));
  } catch (const std::exception& error) {
    print_pod_error("launch", error);
    return kLaunchPathUnusable;
  }
  return kLaunchOk;
}

// Runs mpirun (launcher/supervise.h: SIGTERM/SIGINT forwarded); returns its exit code, or -1 when
// it could not start.
int run_mpirun(const std::vector<std::string>& argv, int* signal_received) {
  SpawnOptions spawn;
  spawn.argv = argv;
  spawn.environment = mpirun_environment(current_environment());
  const char* path = std::getenv("PATH");
  spawn.path = path ? path : "/usr/local/bin:/usr/bin:/bin";
  spawn.pipe_stdio = false;
  try {
    return run_forwarding_signals(spawn, "ringd launch", "mpirun", signal_received);
  } catch (const std::exception& error) {
    print_pod_error("launch", error);
    return -1;
  }
}

// Steps 2-5 of the footer, with the restarts; returns launch's exit code.
int run_job(const LaunchFlags& flags, const Job& job, const std::vector<std::string>& command) {
  if (!flags.no_marker) remove_failure(flags.marker);  // an earlier launch's verdict
  // Starts of this job's command so far, by this launch and by earlier ones (pod 0 restarted).
  const std::string attempts_file = flags.no_marker ? "" : attempts_path(flags.marker);
  int attempts = 0;
  if (!attempts_file.empty()) {
    std::string problem;
    attempts = read_attempts(attempts_file, &problem);
    if (!problem.empty()) {
      std::fprintf(stderr, "ringd launch: warning: %s; counting 0 starts\n", problem.c_str());
    }
  }
  std::string restart_note;
  const std::vector<std::string> resumed = restart_command(command, &restart_note);
  if (flags.max_restarts > 0 && !restart_note.empty()) {
    std::fprintf(stderr, "ringd launch: note: after a failure, %s\n", restart_note.c_str());
  }

  MpirunPlan plan;
  plan.mpirun = flags.mpirun;
  plan.ringd_path = self_path();
  plan.hostfile = flags.hostfile;
  plan.ranks = job.pod.replicas * flags.slots;
  plan.interface = flags.interface;
  const unsigned cpus = std::thread::hardware_concurrency();
  plan.oversubscribed =
      flags.oversubscribed || (cpus > 0 && static_cast<unsigned>(flags.slots) > cpus);
  plan.running_as_root = ::geteuid() == 0;
  plan.agent_port = flags.agent_port;
  plan.extra_args = flags.mpirun_args;
  plan.forward_env = forwarded_variables(current_environment());
  plan.sigkill_timeout_s = flags.sigkill_timeout_s;

  // Counts one more start (in the attempts file too); false when that file cannot be written.
  const auto count_start = [&attempts, &attempts_file] {
    ++attempts;
    if (attempts_file.empty()) return true;
    try {
      write_attempts(attempts_file, attempts);
    } catch (const std::exception& error) {
      print_pod_error("launch", error);
      return false;
    }
    return true;
  };

  while (true) {
    if (attempts > flags.max_restarts) {
      std::fprintf(stderr,
                   "ringd launch: error: the job's command was started %d time(s) already and "
                   "--max-restarts is %d: not starting it again (%s counts the starts; delete it "
                   "to allow more)\n",
                   attempts, flags.max_restarts, attempts_file.c_str());
      return kLaunchRestartsSpent;
    }
    if (attempts > 0) {
      std::fprintf(stderr, "ringd launch: restart %d of %d: waiting for every pod again\n",
                   attempts, flags.max_restarts);
    }
    const int ready = wait_and_write_hostfile(flags, job);
    if (ready == kLaunchPeersNotReady && attempts > 0) {
      // Pods that did not come back within --wait-timeout (a lost node's pod can take minutes to
      // be replaced) count as one more failed start; launch waits again while the budget lasts.
      if (!count_start()) return kLaunchPathUnusable;
      if (attempts > flags.max_restarts) {
        std::fprintf(stderr,
                     "ringd launch: error: giving up: the pods above did not come back, "
                     "--max-restarts %d spent\n",
                     flags.max_restarts);
        return kLaunchPeersNotReady;
      }
      std::fprintf(stderr,
                   "ringd launch: the pods did not come back in time; that counts as a "
                   "failed start\n");
      continue;
    }
    if (ready != kLaunchOk) return ready;

    plan.command = attempts > 0 ? resumed : command;
    if (!count_start()) return kLaunchPathUnusable;
    const std::vector<std::string> argv_mpirun = mpirun_argv(plan);
    std::string shown;
    for (const std::string& word : argv_mpirun) shown += (shown.empty() ? "" : " ") + word;
    std::fprintf(stderr, "ringd launch: %s\n", shown.c_str());

    int signal_received = 0;
    const int mpirun_code = run_mpirun(argv_mpirun, &signal_received);
    if (mpirun_code < 0) return kLaunchNoMpirun;
    if (signal_received) {
      std::fprintf(stderr, "ringd launch: mpirun ended (exit %d) after signal %d\n", mpirun_code,
                   signal_received);
      return 128 + signal_received;
    }
    if (mpirun_code == 0) break;
    std::fprintf(stderr, "ringd launch: error: mpirun failed with exit code %d\n", mpirun_code);
    // Name the pods whose agent went away: the usual reason a running job dies.
    for (const std::string& host : job.hosts) {
      const std::string why =
          ping_agent(host, flags.agent_port, job.secret, std::chrono::seconds(2));
      if (!why.empty()) {
        std::fprintf(stderr, "ringd launch: pod %s: its agent does not answer: %s\n", host.c_str(),
                     why.c_str());
      }
    }
    if (attempts > flags.max_restarts) {
      if (flags.max_restarts > 0) {
        std::fprintf(stderr,
                     "ringd launch: error: giving up: the command failed %d time(s), "
                     "--max-restarts %d spent\n",
                     attempts, flags.max_restarts);
      }
      return kLaunchTrainingFailed;
    }
    std::fprintf(stderr, "ringd launch: restarting in %.1f s (restart %d of %d)\n",
                 flags.restart_delay_s, attempts, flags.max_restarts);
    const int number = pause_unless_signalled(
        std::chrono::milliseconds(static_cast<int64_t>(flags.restart_delay_s * 1000)));
    if (number != 0) {
      std::fprintf(stderr, "ringd launch: signal %d before the restart: stopping\n", number);
      return 128 + number;
    }
  }
  if (!flags.no_marker) {
    try {
      write_marker(flags.marker, marker_record(command, job.pod.replicas, flags.slots));
      std::fprintf(stderr, "ringd launch: done; wrote %s\n", flags.marker.c_str());
      if (attempts > 1) {
        std::fprintf(stderr, "ringd launch: the job finished after %d restart(s)\n", attempts - 1);
      }
      ::unlink(attempts_file.c_str());
    } catch (const std::exception& error) {
      print_pod_error("launch", error);
      return kLaunchPathUnusable;
    }
  }
  return kLaunchOk;
}

}  // namespace

int run_hostfile_command(int argc, const char* const* argv) {
  std::vector<std::string> words;
  std::vector<std::string> rest;
  split_at_double_dash(argc - 1, argv + 1, &words, &rest);
  words[0] = "ringd hostfile";
  LaunchFlags flags;
  CLI::App app{"ringd hostfile: wait for every pod's agent, then write mpirun's hostfile",
               "ringd hostfile"};
  add_hostfile_options(&app, &flags);
  const int parsed = parse_words(&app, words);
  if (parsed >= 0) return parsed;
  Job job;
  try {
    job = resolve_job(&flags);
  } catch (const std::exception& error) {
    print_pod_error("hostfile", error);
    return kLaunchUsage;
  }
  const int code = wait_and_write_hostfile(flags, job);
  if (code == kLaunchOk) std::printf("%s\n", flags.hostfile.c_str());
  return code;
}

int run_launch_command(int argc, const char* const* argv) {
  std::vector<std::string> words;
  std::vector<std::string> command;
  split_at_double_dash(argc - 1, argv + 1, &words, &command);
  words[0] = "ringd launch";
  LaunchFlags flags;
  CLI::App app{"ringd launch: run the job from pod 0 with mpirun through the pods' agents",
               "ringd launch"};
  app.footer(kLaunchFooter);
  add_hostfile_options(&app, &flags);
  app.add_option("--marker", flags.marker,
                 "completion marker, on a volume that survives a restart (default "
                 "/var/lib/ringd/launch.done)");
  app.add_flag("--no-marker", flags.no_marker, "no completion marker: train on every start");
  app.add_option("--iface", flags.interface,
                 "network interface for MPI's TCP traffic and Open MPI's out-of-band channel "
                 "(default RINGD_IFACE; unset: Open MPI chooses)");
  app.add_flag("--oversubscribed", flags.oversubscribed,
               "ranks outnumber cores: --mca mpi_yield_when_idle 1 --oversubscribe (automatic "
               "when --slots exceeds this pod's CPUs)");
  app.add_option("--mpirun", flags.mpirun, "the mpirun to run (default: mpirun from PATH)");
  app.add_option("--mpirun-arg", flags.mpirun_args, "one more mpirun argument; repeatable")
      ->allow_extra_args(false);
  app.add_option("--max-restarts", flags.max_restarts,
                 "run the command again up to N times after it failed (default 0); a ringd train "
                 "command with --checkpoint-dir resumes from its newest checkpoint")
      ->check(CLI::Range(0, 1000));
  app.add_option("--restart-delay", flags.restart_delay_s,
                 "seconds between a failure and waiting for the pods again (default 5)")
      ->check(cli::finite_range(0, kMaxSeconds));
  app.add_option(
         "--sigkill-timeout", flags.sigkill_timeout_s,
         "seconds Open MPI gives a rank between SIGTERM and SIGKILL when the job ends early "
         "(odls_base_sigkill_timeout; default 3: time for ringd train to finish its step "
         "and write a checkpoint; 0: Open MPI's 1 s). A failed job takes about 2-4 times "
         "this to wind down")
      ->check(CLI::Range(0, 3600));
  const int parsed = parse_words(&app, words);
  if (parsed >= 0) return parsed;
  if (command.empty()) {
    std::fprintf(stderr, "ringd launch: error: no command: ringd launch [OPTIONS] -- COMMAND...\n");
    return kLaunchUsage;
  }
  Job job;
  try {
    job = resolve_job(&flags);
  } catch (const std::exception& error) {
    print_pod_error("launch", error);
    return kLaunchUsage;
  }

  if (!flags.no_marker) {
    std::string record;
    try {
      // Something that is not a marker file at its path (a directory, a FIFO) is an error, not
      // "already finished".
      if (read_marker(flags.marker, &record)) {
        std::printf(
            "ringd launch: the job already finished (%s says %s); not training again. "
            "Delete the marker to run it again.\n",
            flags.marker.c_str(),
            record.empty() ? "nothing" : record.substr(0, record.find('\n')).c_str());
        return kLaunchOk;
      }
      check_marker_writable(flags.marker);
    } catch (const std::exception& error) {
      print_pod_error("launch", error);
      return kLaunchPathUnusable;
    }
  }
  const int code = run_job(flags, job, command);
  if (!flags.no_marker && code != kLaunchOk && code < 128) {
    // Launch's own verdict, for `ringd status` (a signal ends launch with nothing to record).
    try {
      write_failure(flags.marker, failure_record(code, command, job.pod.replicas, flags.slots));
    } catch (const std::exception& error) {
      print_pod_error("launch", error);
    }
  }
  return code;
}

constexpr const char* kStatusFooter = R"(
How pod 0's `ringd launch` ended, read from the job volume: the completion marker means it
trained (exit 0); the failure record MARKER.failed means it gave up (exit: launch's own code, 1,
3, 5 or 6); neither means the job still runs or never started (exit 7). --wait waits (checking
once a second) until one of them exists, bounded by --timeout. The StatefulSet form's pods never
end, so this is its one command that waits for the job and says how it ended:

  kubectl exec -n ringd ringd-0 -- ringd status --wait

See docs/launcher.md.
)";

int run_status_command(int argc, const char* const* argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  words[0] = "ringd status";
  std::string marker = "/var/lib/ringd/launch.done";
  bool wait = false;
  double timeout_s = 0;
  CLI::App app{"ringd status: how pod 0's ringd launch ended (or wait until it has)",
               "ringd status"};
  app.footer(kStatusFooter);
  app.add_option("--marker", marker,
                 "launch's completion marker (default /var/lib/ringd/launch.done); the failure "
                 "record is MARKER.failed");
  app.add_flag("--wait", wait, "wait until launch has ended");
  app.add_option("--timeout", timeout_s, "with --wait: give up after this many seconds (0: never)")
      ->check(cli::finite_range(0, kMaxSeconds));
  const int parsed = parse_words(&app, words);
  if (parsed >= 0) return parsed;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    std::string record;
    try {
      if (read_marker(marker, &record)) {
        std::printf("done: %s", record.c_str());
        return kLaunchOk;
      }
      if (read_marker(failure_path(marker), &record)) {
        const int code = record_exit_code(record);
        std::printf("failed (launch exit %d): %s", code, record.c_str());
        return code > 0 ? code : kLaunchTrainingFailed;
      }
    } catch (const std::exception& error) {
      print_pod_error("status", error);
      return kLaunchPathUnusable;
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!wait || (timeout_s > 0 && waited >= timeout_s)) {
      std::printf("not finished%s: neither %s nor %s exists (the job runs, or never started)\n",
                  wait ? (" after " + std::to_string(static_cast<int>(waited)) + " s").c_str() : "",
                  marker.c_str(), failure_path(marker).c_str());
      return kStatusNotFinished;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        timeout_s > 0
            ? std::min<int64_t>(1000, static_cast<int64_t>((timeout_s - waited) * 1000) + 1)
            : 1000));
  }
}

}  // namespace ringd::cli
