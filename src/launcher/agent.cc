#include "launcher/agent.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/files.h"
#include "launcher/child_process.h"
#include "launcher/exec_command_line.h"
#include "launcher/exec_server.h"
#include "launcher/http_server.h"
#include "launcher/process_self.h"

namespace ringd::launcher {
namespace {

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
                           const AgentOptions& options) {
  const std::string labels = "{pod=\"" + options.name + "\"}";
  std::string out;
  out += metric("ringd_build_info", "gauge", "1, labelled with the version and optional backends",
                "{" + options.build_info_labels + "}", "1");
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
    if (read_state_file(options.metrics_file, kMaxMetricsFileBytes, "the training's metrics file",
                        &text)) {
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

int run_agent(const AgentOptions& options) {
  const std::string& name = options.name;
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

  LaunchState launch;
  ExecServerOptions exec_options;
  exec_options.bind_host = options.bind;
  exec_options.port = options.exec_port;
  exec_options.secret = options.secret;
  exec_options.name = name;
  exec_options.allowed = default_allowed_programs();
  exec_options.allowed.insert(exec_options.allowed.end(), options.allow.begin(),
                              options.allow.end());
  exec_options.stop_grace = options.stop_grace;
  auto exec_server = std::make_unique<ExecServer>(exec_options);
  const ExecServer* server = exec_server.get();
  auto http_server = std::make_unique<HttpServer>(
      options.bind, options.http_port, [server, &launch, &options](const std::string& path) {
        HttpResponse response;
        if (path == "/healthz" || (path == "/readyz" && options.not_ready.empty())) {
          response.body = "ok\n";
        } else if (path == "/readyz") {
          response.status = 503;
          response.body = "not ready: " + options.not_ready;
        } else if (path == "/metrics") {
          response.content_type = "text/plain; version=0.0.4; charset=utf-8";
          response.body = render_metrics(server->stats(), launch, options);
        } else {
          response.status = 404;
          response.body = "not found: try /healthz /readyz /metrics\n";
        }
        return response;
      });
  std::fprintf(stderr, "ringd agent %s: exec service on %s:%u, HTTP on %s:%u\n", name.c_str(),
               options.bind.c_str(), exec_server->port(), options.bind.c_str(),
               http_server->port());

  std::unique_ptr<ChildProcess> launcher;
  if (options.run_launch) {
    SpawnOptions spawn;
    spawn.argv = {self_path(), "launch"};
    spawn.argv.insert(spawn.argv.end(), options.launch_args.begin(), options.launch_args.end());
    spawn.environment = current_environment();
    spawn.pipe_stdio = false;
    launcher = ChildProcess::spawn(spawn);
    launch.configured = true;
    launch.running = true;
    std::fprintf(stderr, "ringd agent %s: started ringd launch (pid %d)\n", name.c_str(),
                 static_cast<int>(launcher->pid()));
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
                   options.exit_with_launch ? "" : "; serving on");
      if (options.exit_with_launch) {
        exit_code = launcher->exit_code();
        stop_signal = SIGTERM;
      }
    }
  }
  http_server.reset();
  stop_job(name, stop_signal, options.stop_grace, launcher.get(), exec_server.get(), signals);
  return exit_code;
}

}  // namespace ringd::launcher
