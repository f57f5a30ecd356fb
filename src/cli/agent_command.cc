// `ringd agent` (every pod's process) and `ringd exec` (its client, Open MPI's rsh agent).
#include <cstdio>
#include <optional>

#include "cli/flag_checks.h"
#include "cli/pod_commands.h"
#include "cli/pod_flags.h"
#include "cli/version.h"
#include "common/tunables.h"
#include "launcher/agent.h"
#include "launcher/exec_client.h"
#include "launcher/exec_command_line.h"
#include "ringd/error.h"

namespace ringd::cli {

// The pod machinery these commands drive (src/launcher).
using launcher::join_command_words;
using launcher::RemoteCommand;
using launcher::run_remote_command;

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

  launcher::AgentOptions options;
  options.name = name;
  options.bind = flags.bind;
  options.exec_port = *flags.exec_port;
  options.http_port = *flags.http_port;
  options.secret = secret;
  options.allow = flags.allow;
  options.metrics_file = flags.metrics_file;
  options.build_info_labels = build_info_labels();
  options.not_ready = not_ready;
  options.run_launch = has_launch && pod.ordinal == 0;
  options.launch_args = launch_args;
  options.exit_with_launch = flags.exit_with_launch;
  options.stop_grace =
      std::chrono::milliseconds(static_cast<int64_t>(flags.stop_grace_seconds * 1000));
  try {
    return launcher::run_agent(options);
  } catch (const std::exception& error) {
    print_pod_error("agent", error);
    return kLaunchUsage;
  }
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
