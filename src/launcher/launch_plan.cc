#include "launcher/launch_plan.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "ringd/error.h"

namespace ringd::launcher {

std::string hostfile_text(const job::PodIdentity& pod, int slots) {
  std::string text;
  for (int i = 0; i < pod.replicas; ++i) {
    text += job::pod_dns_name(pod, i) + " slots=" + std::to_string(slots) + "\n";
  }
  return text;
}

std::chrono::milliseconds backoff_delay(int round) {
  const int64_t delay = int64_t{100} << std::min(round, 5);
  return std::chrono::milliseconds(std::min<int64_t>(delay, 2000));
}

PeerWait wait_for_peers(const std::vector<std::string>& hosts,
                        const std::function<std::string(const std::string&)>& probe,
                        std::chrono::milliseconds timeout,
                        const std::function<std::chrono::steady_clock::time_point()>& now,
                        const std::function<void(std::chrono::milliseconds)>& sleep) {
  PeerWait result;
  const auto start = now();
  const auto deadline = start + timeout;
  std::vector<std::string> waiting = hosts;
  while (true) {
    ++result.rounds;
    result.missing.clear();
    std::vector<std::string> still;
    for (const std::string& host : waiting) {
      const std::string why = probe(host);
      if (!why.empty()) {
        still.push_back(host);
        result.missing.push_back(host + " (" + why + ")");
      }
    }
    waiting = still;
    result.waited = std::chrono::duration_cast<std::chrono::milliseconds>(now() - start);
    if (waiting.empty()) {
      result.ready = true;
      return result;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now());
    if (left.count() <= 0) return result;
    sleep(std::min(backoff_delay(result.rounds - 1), left));
  }
}

std::vector<std::string> mpirun_argv(const MpirunPlan& plan) {
  std::vector<std::string> argv = {plan.mpirun, "--hostfile", plan.hostfile, "-np",
                                   std::to_string(plan.ranks)};
  auto mca = [&argv](const std::string& name, const std::string& value) {
    argv.insert(argv.end(), {"--mca", name, value});
  };
  // Open MPI 4.1 splits the agent string on blanks and runs "<agent...> HOST <orted command>".
  // The default agent port travels in RINGD_AGENT_PORT (below) when it is not 29400.
  mca("plm_rsh_agent", plan.ringd_path + " exec");
  // Every orted is started from here: with tree spawn, orteds would start further orteds through
  // the agent from other pods.
  mca("plm_rsh_no_tree_spawn", "1");
  // Without it Open MPI starts "orted --daemonize": the orted leaves the agent's process group at
  // once and `ringd exec` returns, so neither a lost pod nor a vanished mpirun would end it.
  // Attached, each orted lives as long as its `ringd exec` connection, in both directions.
  mca("orte_leave_session_attached", "1");
  // Open MPI cuts a hostfile's names at the first dot before it hands them to the rsh agent, and
  // a pod's short name (ringd-1) does not resolve in another pod: Kubernetes' search path holds
  // <namespace>.svc.<domain>, not the Service's subdomain. Seen on a real cluster (scripts/
  // e2e_k8s.sh): "ringd exec: error: ringd-1 does not resolve", every start failing.
  mca("orte_keep_fqdn_hostnames", "1");
  if (!plan.interface.empty()) {
    mca("btl_tcp_if_include", plan.interface);
    mca("oob_tcp_if_include", plan.interface);
  }
  if (plan.oversubscribed) {
    // Ranks outnumber cores: without yielding, idle ranks busy-poll and starve the others.
    mca("mpi_yield_when_idle", "1");
    argv.push_back("--oversubscribe");
  }
  if (plan.sigkill_timeout_s > 0) {
    mca("odls_base_sigkill_timeout", std::to_string(plan.sigkill_timeout_s));
  }
  if (plan.running_as_root) argv.push_back("--allow-run-as-root");
  for (const std::string& name : plan.forward_env) argv.insert(argv.end(), {"-x", name});
  argv.insert(argv.end(), plan.extra_args.begin(), plan.extra_args.end());
  argv.insert(argv.end(), plan.command.begin(), plan.command.end());
  return argv;
}

std::vector<std::string> mpirun_environment(std::vector<std::string> environment) {
  for (const std::string& entry : environment) {
    if (entry.rfind("SHELL=", 0) == 0) return environment;
  }
  environment.push_back("SHELL=/bin/sh");
  return environment;
}

std::vector<std::string> forwarded_variables(const std::vector<std::string>& environment) {
  std::vector<std::string> names;
  for (const std::string& entry : environment) {
    if (entry.rfind("RINGD_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("RINGD_JOB_SECRET", 0) == 0) continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool read_marker(const std::string& path, std::string* contents) {
  return read_state_file(path, kMaxMarkerBytes, "the completion marker", contents);
}

void write_marker(const std::string& path, const std::string& contents) {
  write_file_atomically(path, contents);
}

void check_marker_writable(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    RINGD_THROW(kIo, "completion marker " << path << " could not be written: " << directory << ": "
                                          << std::strerror(errno)
                                          << " (mount the job volume there, pass --marker PATH, "
                                             "or --no-marker)");
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

namespace {

std::string launch_record(int exit_code, const std::vector<std::string>& command, int pods,
                          int slots) {
  char finished[32];
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  std::strftime(finished, sizeof(finished), "%Y-%m-%dT%H:%M:%SZ", &utc);
  nlohmann::json record = {{"finished", finished},
                           {"exit_code", exit_code},
                           {"pods", pods},
                           {"slots", slots},
                           {"command", command}};
  return record.dump() + "\n";
}

}  // namespace

std::string marker_record(const std::vector<std::string>& command, int pods, int slots) {
  return launch_record(0, command, pods, slots);
}

std::string attempts_path(const std::string& marker) { return marker + ".attempts"; }

std::string failure_path(const std::string& marker) { return marker + ".failed"; }

std::string failure_record(int exit_code, const std::vector<std::string>& command, int pods,
                           int slots) {
  return launch_record(exit_code, command, pods, slots);
}

void write_failure(const std::string& marker, const std::string& record) {
  write_file_atomically(failure_path(marker), record);
}

void remove_failure(const std::string& marker) { ::unlink(failure_path(marker).c_str()); }

int record_exit_code(const std::string& record) {
  const nlohmann::json parsed = nlohmann::json::parse(record, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("exit_code") ||
      !parsed["exit_code"].is_number_integer()) {
    return -1;
  }
  return parsed["exit_code"].get<int>();
}

int read_attempts(const std::string& path, std::string* problem) {
  problem->clear();
  std::string text;
  try {
    if (!read_state_file(path, kMaxMarkerBytes, "the attempts file", &text)) return 0;
  } catch (const Error& error) {
    *problem = error.what();
    return 0;
  }
  text = text.substr(0, text.find('\n'));
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 1000000) {
    *problem = path + " does not hold a count of attempts ('" + text.substr(0, 40) + "')";
    return 0;
  }
  return static_cast<int>(value);
}

void write_attempts(const std::string& path, int attempts) {
  write_file_atomically(path, std::to_string(attempts) + "\n");
}

std::vector<std::string> restart_command(const std::vector<std::string>& command,
                                         std::string* note) {
  note->clear();
  const auto train = std::find(command.begin(), command.end(), "train");
  const bool is_ringd_train = train != command.begin() && train != command.end() && [&] {
    const std::string& program = *(train - 1);
    const size_t slash = program.rfind('/');
    return program.substr(slash == std::string::npos ? 0 : slash + 1) == "ringd";
  }();
  if (!is_ringd_train) {
    *note = "not a `ringd train` command: it runs again as it is (it must resume by itself)";
    return command;
  }
  const auto has = [&](const std::string& flag) {
    return std::any_of(command.begin(), command.end(), [&](const std::string& word) {
      return word == flag || word.rfind(flag + "=", 0) == 0;
    });
  };
  if (has("--resume")) return command;
  if (!has("--checkpoint-dir")) {
    *note = "the command has no --checkpoint-dir: it starts again from step 0";
    return command;
  }
  std::vector<std::string> resumed = command;
  resumed.push_back("--resume");
  return resumed;
}

}  // namespace ringd::launcher
