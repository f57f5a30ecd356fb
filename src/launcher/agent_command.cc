// `ringd agent` (every pod's process) and `ringd exec` (its client, Open MPI's rsh agent).
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/logging.h"
#include "common/tunables.h"
#include "launcher/child_process.h"
#include "launcher/exec_client.h"
#include "launcher/exec_command_line.h"
#include "launcher/exec_server.h"
#include "launcher/http_server.h"
#include "launcher/pod_commands.h"
#include "launcher/pod_flags.h"
#include "ringd/error.h"

namespace ringd::launcher {
namespace {

constexpr const char* kAgentFooter = R"(
Every pod of the StatefulSet runs this (the container's entrypoint). It serves:
  :29401 /healthz /readyz /metrics   (Prometheus text: the agent's counters, then the training
                                      run's metrics file verbatim when it exists)
  :29400 exec service                (ringd exec, authenticated with the job secret)
The job secret comes from RINGD_JOB_SECRET or RINGD_JOB_SECRET_FILE; without one the agent does
not start. Words after "--" are `ringd launch` arguments, used on ordinal 0 only:

  ringd agent -- --iface eth0 -- ringd train --epochs 1

See docs/launcher.md.
)";

struct AgentFlags {
  uint16_t exec_port = 0;
  uint16_t http_port = 0;
  std::string bind = "0.0.0.0";
  std::vector<std::string> allow;
  std::string metrics_file;  // empty: RINGD_METRICS_FILE
  bool exit_with_launch = false;
  TopologyFlags identity;
};

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
  if (launch.configured.load()) {
    out += metric("ringd_launch_running", "gauge", "1 while ringd launch runs (ordinal 0)", labels,
                  launch.running.load() ? "1" : "0");
    out += metric("ringd_launch_exit_code", "gauge",
                  "ringd launch's exit code once it ended, -1 before", labels,
                  std::to_string(launch.exit_code.load()));
  }
  // What the training process reported (docs/launcher.md: the metrics file).
  std::ifstream file(metrics_file);
  if (file) {
    std::stringstream text;
    text << file.rdbuf();
    out += text.str();
    if (!out.empty() && out.back() != '\n') out += '\n';
  }
  return out;
}

std::string self_path() {
  char path[4096];
  const ssize_t length = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return "ringd";
  return std::string(path, static_cast<size_t>(length));
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
                 "exec service port (default RINGD_AGENT_PORT, 29400)");
  app.add_option("--http-port", flags.http_port, "HTTP port (default RINGD_HTTP_PORT, 29401)");
  app.add_option("--bind", flags.bind, "address to listen on (default 0.0.0.0)");
  app.add_option("--allow", flags.allow,
                 "also allow this program (base name) besides orted, prted and ringd; repeatable");
  app.add_option("--metrics-file", flags.metrics_file,
                 "Prometheus text file written by the run's rank 0, appended to /metrics "
                 "(default RINGD_METRICS_FILE)");
  app.add_flag("--exit-with-launch", flags.exit_with_launch,
               "on ordinal 0: exit with ringd launch's exit code instead of serving on");
  add_identity_options(&app, &flags.identity);
  const int parsed = parse_words(&app, words);
  if (parsed >= 0) return parsed;

  PodIdentity pod;
  std::string name;
  std::string secret;
  try {
    const Tunables& t = tunables();
    secret = t.job_secret;
    if (flags.exec_port == 0) flags.exec_port = static_cast<uint16_t>(t.agent_port);
    if (flags.http_port == 0) flags.http_port = static_cast<uint16_t>(t.http_port);
    if (flags.metrics_file.empty()) flags.metrics_file = t.metrics_file;
    const EnvLookup env = process_environment();
    try {
      pod = resolve_pod_identity(flags.identity, env);
      name = pod.set_name + "-" + std::to_string(pod.ordinal);
    } catch (const Error&) {
      if (has_launch) throw;  // launching needs to know the pods; serving alone does not
      const char* host = env("HOSTNAME");
      name = host ? host : "agent";
    }
  } catch (const std::exception& error) {
    print_pod_error("agent", error);
    return kLaunchUsage;
  }

  // SIGTERM (pod deletion) and SIGINT end the agent in order; they arrive through a signalfd.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  ::sigprocmask(SIG_BLOCK, &signals, nullptr);
  tcp::Fd signal_fd(::signalfd(-1, &signals, SFD_CLOEXEC));

  LaunchState launch;
  std::unique_ptr<ExecServer> exec_server;
  std::unique_ptr<HttpServer> http_server;
  try {
    ExecServerOptions options;
    options.bind_host = flags.bind;
    options.port = flags.exec_port;
    options.secret = secret;
    options.name = name;
    options.allowed = default_allowed_programs();
    options.allowed.insert(options.allowed.end(), flags.allow.begin(), flags.allow.end());
    exec_server = std::make_unique<ExecServer>(options);
    const ExecServer* server = exec_server.get();
    http_server = std::make_unique<HttpServer>(
        flags.bind, flags.http_port,
        [server, &launch, name, metrics_file = flags.metrics_file](const std::string& path) {
          HttpResponse response;
          if (path == "/healthz" || path == "/readyz") {
            response.body = "ok\n";
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
  while (true) {
    pollfd fds[2] = {{signal_fd.get(), POLLIN, 0},
                     {launcher && !launcher->exited() ? launcher->exit_fd() : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if (fds[0].revents) {
      signalfd_siginfo info{};
      ssize_t ignored = ::read(signal_fd.get(), &info, sizeof(info));
      (void)ignored;
      std::fprintf(stderr, "ringd agent %s: signal %u: stopping\n", name.c_str(), info.ssi_signo);
      if (launcher && !launcher->exited()) {
        // launch forwards it to mpirun and waits for the job to end.
        launcher->signal_leader(static_cast<int>(info.ssi_signo));
        if (!launcher->wait_for_exit(std::chrono::seconds(25))) launcher->terminate({});
      }
      break;
    }
    if (fds[1].revents && launcher) {
      launcher->wait_for_exit(std::chrono::milliseconds(-1));
      launch.running = false;
      launch.exit_code = launcher->exit_code();
      std::fprintf(stderr, "ringd agent %s: ringd launch ended (%s)%s\n", name.c_str(),
                   launcher->describe_status().c_str(),
                   flags.exit_with_launch ? "" : "; serving on");
      if (flags.exit_with_launch) {
        exit_code = launcher->exit_code();
        break;
      }
    }
  }
  http_server.reset();
  exec_server->stop();
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
          parse_host_port("--port", "h:" + value, &host, &port);
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

}  // namespace ringd::launcher
