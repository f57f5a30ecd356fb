// `ringd agent` (every pod's process) and `ringd exec` (its client, Open MPI's rsh agent).
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "cli/flag_checks.h"
#include "cli/pod_commands.h"
#include "cli/pod_flags.h"
#include "cli/version.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/tunables.h"
#include "launcher/child_process.h"
#include "launcher/exec_client.h"
#include "launcher/exec_command_line.h"
#include "launcher/exec_server.h"
#include "launcher/http_server.h"
#include "launcher/process_self.h"
#include "ringd/error.h"

namespace ringd::cli {

// The pod machinery these commands drive (src/launcher).
using launcher::become_child_subreaper;
using launcher::BlockedSignals;
using launcher::ChildProcess;
using launcher::current_environment;
using launcher::default_allowed_programs;
using launcher::describe_wait_status;
using launcher::ExecServer;
using launcher::ExecServerOptions;
using launcher::ExecServerStats;
using launcher::HttpResponse;
using launcher::HttpServer;
using launcher::join_command_words;
using launcher::reap_orphans;
using launcher::ReapedOrphan;
using launcher::RemoteCommand;
using launcher::run_remote_command;
using launcher::running_orphans;
using launcher::self_path;
using launcher::SpawnOptions;

namespace {

constexpr const char* kAgentFooter = R"(
Every pod of the StatefulSet runs this (the container's entrypoint). It serves:
  :29401 /healthz /readyz /metrics   (Prometheus text: the agent's counters, then the training
                                      run's metrics file verbatim when it exists)
  :29400 exec service                (ringd exec, authenticated with the job secret)
The job secret comes from RINGD_JOB_SECRET or RINGD_JOB_SECRET_FILE; without one the agent does
not start. Words after "--" are `ringd launch` arguments, used on ordinal 0 only:

  ringd agent -- --iface eth0 -- ringd train --epochs 1

As the pod's PID 1 (and a child subreaper anywhere) it reaps every orphaned process of its jobs.
On SIGTERM or SIGINT it sends SIGTERM to ringd launch, to each exec command's process group and to
each orphan, SIGKILL after --stop-grace, then exits.

See docs/launcher.md.
)";

struct AgentFlags {
  std::optional<uint16_t> exec_port;  // unset: RINGD_AGENT_PORT; 0: any free port
  std::optional<uint16_t> http_port;  // unset: RINGD_HTTP_PORT; 0: any free port
  std::string bind = "0.0.0.0";
  std::vector<std::string> allow;
  std::string metrics_file;  // empty: RINGD_METRICS_FILE
  bool exit_with_launch = false;
  // Under the manifests' terminationGracePeriodSeconds (30 s, k8s/base/statefulset.yaml), so that
  // the agent's SIGKILL, not the kubelet's, ends what ignored SIGTERM.
  double stop_grace_seconds = 20;
  job::TopologyFlags identity;
};

// How often the agent looks for orphans to reap when no SIGCHLD woke it (SIGCHLD is the main
// trigger; the poll covers one coalesced with another while it was reaping).
constexpr int kReapPollMs = 1000;
// The metrics file holds a few dozen Prometheus lines; a bound keeps a wrong file out of /metrics.
constexpr size_t kMaxMetricsFileBytes = 1 << 20;

// The agent's state that /metrics and /readyz read (atomics: the HTTP thread reads them).
struct LaunchState {
  std::atomic<bool> configured{false};
  std::atomic<bool> running{false};
  std::atomic<int> exit_code{-1};
};

std::string metric(const char* name, const char* type, const char* help, const std::string& labels,
                   const std::string& value) {
  return std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + labels + " " + value + "\n";
}

std::string render_metrics(const ExecServerStats& stats, const LaunchState& launch,
                           const std::string& pod, const std::string& metrics_file) {
  const std::string labels = "{pod=\"" + pod + "\"}";
  std::string out;
  out += metric("ringd_build_info", "gauge", "1, labelled with the version and optional backends",
                "{" + build_info_labels() + "}", "1");
  out += metric("ringd_agent_up", "gauge", "1 while the agent runs", labels, "1");
  out += metric("ringd_exec_connections_total", "counter", "exec service connections accepted",
                labels, std::to_string(stats.connections.load()));
  out += metric("ringd_exec_auth_failures_total", "counter",
                "connections or frames rejected: wrong secret, forged or replayed messages", labels,
                std::to_string(stats.auth_failures.load()));
  out += metric("ringd_exec_refused_total", "counter",
                "commands refused (not allowed, malformed, not startable)", labels,
                std::to_string(stats.refused.load()));
  out += metric("ringd_exec_started_total", "counter", "commands started", labels,
                std::to_string(stats.started.load()));
  out += metric("ringd_exec_killed_total", "counter",
                "children killed because their caller disconnected", labels,
                std::to_string(stats.killed.load()));
  out += metric("ringd_exec_running", "gauge", "children running now", labels,
                std::to_string(stats.running.load()));
  out += metric("ringd_exec_handshakes_dropped_total", "counter",
                "connections dropped before authenticating: silent, slow, closed or pushed out",
                labels, std::to_string(stats.handshakes_dropped.load()));
  out += metric("ringd_exec_accept_failures_total", "counter",
                "failed accepts (out of file descriptors); accepting pauses 100 ms each", labels,
                std::to_string(stats.accept_failures.load()));
  if (launch.configured.load()) {
    out += metric("ringd_launch_running", "gauge", "1 while ringd launch runs (ordinal 0)", labels,
                  launch.running.load() ? "1" : "0");
    out += metric("ringd_launch_exit_code", "gauge",
                  "ringd launch's exit code once it ended, -1 before", labels,
                  std::to_string(launch.exit_code.load()));
  }
  // What the training process reported (docs/launcher.md: the metrics file).
  std::string text;
  try {
    if (read_state_file(metrics_file, kMaxMetricsFileBytes, "the training's metrics file", &text)) {
      out += text;
      if (!out.empty() && out.back() != '\n') out += '\n';
    }
  } catch (const std::exception& error) {
    out += "# ringd agent: skipped: " + std::string(error.what()) + "\n";
  }
  return out;
}

// Reaps the orphans that have ended, one line each (PID 1's duty; see reap_orphans()).
void reap_and_log(const std::string& name) {
  for (const ReapedOrphan& orphan : reap_orphans()) {
    std::fprintf(stderr, "ringd agent %s: reaped orphaned process %d (%s)\n", name.c_str(),
                 static_cast<int>(orphan.pid), describe_wait_status(orphan.wait_status).c_str());
  }
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) out += (out.empty() ? "" : " ") + std::to_string(pid);
  return out;
}

// Sends SIGTERM or SIGKILL to each running orphan; returns how many.
size_t signal_orphans(const std::string& name, int signal_number, const char* why) {
  const std::vector<pid_t> orphans = running_orphans();
  if (orphans.empty()) return 0;
  for (pid_t pid : orphans) ::kill(pid, signal_number);
  std::fprintf(stderr, "ringd agent %s: %s to %zu orphaned process(es)%s (pids %s)\n", name.c_str(),
               signal_number == SIGKILL ? "SIGKILL" : "SIGTERM", orphans.size(), why,
               pid_list(orphans).c_str());
  return orphans.size();
}

// Ends everything the agent started or adopted within `grace`: SIGTERM at once to ringd launch
// (`signal_number` there: launch forwards it to mpirun), to each exec command's process group and
// to each orphan; SIGKILL to whatever runs after `grace`; orphans reaped as they end. Returns once
// nothing is left or, for processes that SIGKILL cannot end at once, a second after the grace.
void stop_job(const std::string& name, int signal_number, std::chrono::milliseconds grace,
              ChildProcess* launcher, ExecServer* exec_server, const BlockedSignals& signals) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + grace;
  const auto left = [&deadline] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  if (launcher && !launcher->exited()) {
    launcher->signal_leader(signal_number);
    std::fprintf(stderr, "ringd agent %s: signal %d forwarded to ringd launch (pid %d)\n",
                 name.c_str(), signal_number, static_cast<int>(launcher->pid()));
  }
  signal_orphans(name, SIGTERM, "");
  const int64_t exec_running = exec_server->stats().running.load();
  if (exec_running > 0) {
    std::fprintf(stderr,
                 "ringd agent %s: SIGTERM to the process groups of %lld exec command(s), SIGKILL "
                 "after %lld ms\n",
                 name.c_str(), static_cast<long long>(exec_running),
                 static_cast<long long>(grace.count()));
  }
  exec_server->stop();  // returns once every exec command ended: within the grace, or killed
  if (launcher && !launcher->exited() && !launcher->wait_for_exit(left())) {
    std::fprintf(stderr, "ringd agent %s: ringd launch still running after %lld ms: SIGKILL\n",
                 name.c_str(), static_cast<long long>(grace.count()));
    launcher->terminate({});
  }
  // Orphans: until they are gone or the grace is over, woken by SIGCHLD.
  const auto wait_for_orphans = [&](std::chrono::milliseconds bound) {
    const Clock::time_point until = Clock::now() + bound;
    while (true) {
      reap_and_log(name);
      if (running_orphans().empty() || Clock::now() >= until) break;
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      pollfd entry{signals.fd(), POLLIN, 0};
      ::poll(&entry, 1, static_cast<int>(std::clamp<int64_t>(wait.count(), 1, kReapPollMs)));
      signals.read();  // a second SIGTERM changes nothing: the grace is already bounded
    }
    reap_and_log(name);
  };
  wait_for_orphans(left());
  if (signal_orphans(name, SIGKILL, " still running after the grace") > 0) {
    wait_for_orphans(std::chrono::seconds(1));
  }
  std::fprintf(stderr, "ringd agent %s: stopped\n", name.c_str());
}

}  // namespace

int run_agent_command(int argc, const char* const* argv) {
  std::vector<std::string> words;
  std::vector<std::string> launch_args;
  const bool has_launch = split_at_double_dash(argc - 1, argv + 1, &words, &launch_args);
  words[0] = "ringd agent";
  AgentFlags flags;
  CLI::App app{"ringd agent: health, metrics and the authenticated exec service of one pod",
               "ringd agent"};
  app.footer(kAgentFooter);
  app.add_option("--exec-port", flags.exec_port,
                 "exec service port (default RINGD_AGENT_PORT, 29400; 0 = any free port, printed "
                 "at start)");
  app.add_option("--http-port", flags.http_port,
                 "HTTP port (default RINGD_HTTP_PORT, 29401; 0 = any free port, printed at start)");
  app.add_option("--bind", flags.bind, "address to listen on (default 0.0.0.0)");
  app.add_option("--allow", flags.allow,
                 "also allow this program besides orted, prted and ringd: a base name found on the "
                 "agent's PATH, or an absolute path; compared by real path; repeatable");
  app.add_option("--metrics-file", flags.metrics_file,
                 "Prometheus text file written by the run's rank 0, appended to /metrics "
                 "(default RINGD_METRICS_FILE)");
  app.add_flag("--exit-with-launch", flags.exit_with_launch,
               "on ordinal 0: exit with ringd launch's exit code instead of serving on");
  app.add_option("--stop-grace", flags.stop_grace_seconds,
                 "on SIGTERM/SIGINT: seconds the job's processes get to end before SIGKILL "
                 "(default 20; keep it under the pod's terminationGracePeriodSeconds)")
      ->check(cli::finite_range(0, kMaxSeconds));
  add_identity_options(&app, &flags.identity);
  const int parsed = parse_words(&app, words);
  if (parsed >= 0) return parsed;

  job::PodIdentity pod;
  std::string name;
  std::string secret;
  std::string not_ready;  // why /readyz answers 503; "" once the identity resolved
  try {
    const Tunables& t = tunables();
    secret = t.job_secret;
    if (!flags.exec_port) flags.exec_port = static_cast<uint16_t>(t.agent_port);
    if (!flags.http_port) flags.http_port = static_cast<uint16_t>(t.http_port);
    if (flags.metrics_file.empty()) flags.metrics_file = t.metrics_file;
    const job::EnvLookup env = job::process_environment();
    try {
      pod = job::resolve_pod_identity(flags.identity, env);
      name = pod.set_name + "-" + std::to_string(pod.ordinal);
    } catch (const Error& error) {
      if (has_launch) throw;  // launching needs to know the pods; serving alone does not
      job::check_explicit_pod_name(flags.identity, env);  // only an absent pod name falls back
      const char* host = env("HOSTNAME");
      name = host ? host : "agent";
      not_ready = std::string("the pod's identity is not resolved: ") + error.what() + "\n";
      std::fprintf(stderr, "ringd agent %s: warning: /readyz answers 503: %s", name.c_str(),
                   not_ready.c_str());
    }
  } catch (const std::exception& error) {
    print_pod_error("agent", error);
    return kLaunchUsage;
  }

  // SIGTERM (pod deletion) and SIGINT end the agent in order, SIGCHLD says an orphan may wait to
  // be reaped; they arrive through a signalfd, blocked before any thread starts.
  const BlockedSignals signals({SIGTERM, SIGINT, SIGCHLD});
  // PID 1's duty, the same when it is not PID 1 (tests, a shared process namespace): processes
  // orphaned below the agent become its children, and it reaps them.
  if (!become_child_subreaper()) {
    std::fprintf(stderr,
                 "ringd agent %s: warning: cannot become a child subreaper (%s): orphans of its "
                 "commands go to PID 1\n",
                 name.c_str(), std::strerror(errno));
  }
  const auto stop_grace =
      std::chrono::milliseconds(static_cast<int64_t>(flags.stop_grace_seconds * 1000));

  LaunchState launch;
  std::unique_ptr<ExecServer> exec_server;
  std::unique_ptr<HttpServer> http_server;
  try {
    ExecServerOptions options;
    options.bind_host = flags.bind;
    options.port = *flags.exec_port;
    options.secret = secret;
    options.name = name;
    options.allowed = default_allowed_programs();
    options.allowed.insert(options.allowed.end(), flags.allow.begin(), flags.allow.end());
    options.stop_grace = stop_grace;
    exec_server = std::make_unique<ExecServer>(options);
    const ExecServer* server = exec_server.get();
    http_server = std::make_unique<HttpServer>(
        flags.bind, *flags.http_port,
        [server, &launch, name, not_ready,
         metrics_file = flags.metrics_file](const std::string& path) {
          HttpResponse response;
          if (path == "/healthz" || (path == "/readyz" && not_ready.empty())) {
            response.body = "ok\n";
          } else if (path == "/readyz") {
            response.status = 503;
            response.body = "not ready: " + not_ready;
          } else if (path == "/metrics") {
            response.content_type = "text/plain; version=0.0.4; charset=utf-8";
            response.body = render_metrics(server->stats(), launch, name, metrics_file);
          } else {
            response.status = 404;
            response.body = "not found: try /healthz /readyz /metrics\n";
          }
          return response;
        });
  } catch (const std::exception& error) {
    print_pod_error("agent", error);
    return kLaunchUsage;
  }
  std::fprintf(stderr, "ringd agent %s: exec service on %s:%u, HTTP on %s:%u\n", name.c_str(),
               flags.bind.c_str(), exec_server->port(), flags.bind.c_str(), http_server->port());

  std::unique_ptr<ChildProcess> launcher;
  if (has_launch && pod.ordinal == 0) {
    SpawnOptions spawn;
    spawn.argv = {self_path(), "launch"};
    spawn.argv.insert(spawn.argv.end(), launch_args.begin(), launch_args.end());
    spawn.environment = current_environment();
    spawn.pipe_stdio = false;
    try {
      launcher = ChildProcess::spawn(spawn);
      launch.configured = true;
      launch.running = true;
      std::fprintf(stderr, "ringd agent %s: started ringd launch (pid %d)\n", name.c_str(),
                   static_cast<int>(launcher->pid()));
    } catch (const std::exception& error) {
      print_pod_error("agent", error);
      return kLaunchUsage;
    }
  }

  int exit_code = 0;
  int stop_signal = 0;
  while (stop_signal == 0) {
    // Watched until its end is recorded, not while exited() is false: the reaper thread sets
    // exited() before the SIGCHLD-woken loop has seen the exit, and the byte on exit_fd() stays.
    const bool watch_launch = launcher && launch.running.load();
    pollfd fds[2] = {{signals.fd(), POLLIN, 0},
                     {watch_launch ? launcher->exit_fd() : -1, POLLIN, 0}};
    if (::poll(fds, 2, kReapPollMs) < 0 && errno != EINTR) {
      stop_signal = SIGTERM;
      break;
    }
    if (fds[0].revents) stop_signal = signals.read(SIGCHLD);
    reap_and_log(name);  // on SIGCHLD, and every kReapPollMs in case one was missed
    if (stop_signal != 0) {
      std::fprintf(stderr, "ringd agent %s: signal %d: stopping\n", name.c_str(), stop_signal);
      break;
    }
    if (watch_launch && (fds[1].revents || launcher->exited())) {
      launcher->wait_for_exit(std::chrono::milliseconds(-1));
      launch.running = false;
      launch.exit_code = launcher->exit_code();
      std::fprintf(stderr, "ringd agent %s: ringd launch ended (%s)%s\n", name.c_str(),
                   launcher->describe_status().c_str(),
                   flags.exit_with_launch ? "" : "; serving on");
      if (flags.exit_with_launch) {
        exit_code = launcher->exit_code();
        stop_signal = SIGTERM;
      }
    }
  }
  http_server.reset();
  stop_job(name, stop_signal, stop_grace, launcher.get(), exec_server.get(), signals);
  return exit_code;
}

int run_exec_command(int argc, const char* const* argv) {
  // ssh-like: options, then HOST, then the command words (taken verbatim, whatever they look like).
  RemoteCommand command;
  std::vector<std::string> words;
  int i = 2;
  try {
    command.port = static_cast<uint16_t>(tunables().agent_port);
    command.secret = tunables().job_secret;
    for (; i < argc && argv[i][0] == '-'; ++i) {
      const std::string option = argv[i];
      if (option == "--") {
        ++i;
        break;
      }
      if (option == "-h" || option == "--help") {
        std::printf(
            "Usage: ringd exec [--port PORT] [--timeout SECONDS] HOST COMMAND...\n\n"
            "Runs COMMAND on HOST's `ringd agent` (Open MPI's plm_rsh_agent: mpirun calls\n"
            "`ringd exec HOST <orted command line>`). The words are joined with spaces, as ssh\n"
            "does; the agent allows orted, prted and ringd (and its --allow programs). stdin,\n"
            "stdout and stderr are forwarded; the exit code is the command's (128+N for signal\n"
            "N), or 255 when the agent could not be reached, authenticated or stayed not\n"
            "connected. Port: --port, else RINGD_AGENT_PORT (29400). Secret: RINGD_JOB_SECRET\n"
            "or RINGD_JOB_SECRET_FILE. Single-letter ssh options (-x, -T, ...) are ignored.\n");
        return 0;
      }
      if ((option == "--port" || option == "--timeout") && i + 1 < argc) {
        const std::string value = argv[++i];
        if (option == "--port") {
          uint16_t port = 0;
          std::string host;
          job::parse_host_port("--port", "h:" + value, &host, &port);
          command.port = port;
        } else {
          command.connect_timeout = parse_seconds("--timeout", value);
        }
        continue;
      }
      if (option.size() == 2) continue;  // ssh's -x, -T, -q: meaningless here
      RINGD_THROW(kInvalidArgument, "unknown option " << option << " (ringd exec --help)");
    }
    if (i + 1 >= argc) {
      RINGD_THROW(kInvalidArgument, "usage: ringd exec [--port PORT] HOST COMMAND...");
    }
  } catch (const std::exception& error) {
    print_pod_error("exec", error);
    return kExecFailed;
  }
  command.host = argv[i++];
  for (; i < argc; ++i) words.emplace_back(argv[i]);
  command.command_line = join_command_words(words);
  try {
    return run_remote_command(command);
  } catch (const std::exception& error) {
    print_pod_error("exec", error);
    return kExecFailed;
  }
}

}  // namespace ringd::cli
