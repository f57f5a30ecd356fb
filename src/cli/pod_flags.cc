#include "cli/pod_flags.h"

#include <cstdio>
#include <cstring>

#include "cli/pod_commands.h"
#include "ringd/error.h"

namespace ringd::cli {

void add_identity_options(CLI::App* app, job::TopologyFlags* flags) {
  app->add_option("--pod-name", flags->pod_name,
                  "this pod's name <statefulset>-<ordinal> (default POD_NAME, else the host name)")
      ->group("Identity (StatefulSet)");
  app->add_option("--replicas", flags->replicas,
                  "the StatefulSet's replicas (default RINGD_REPLICAS)")
      ->check(CLI::Range(1, 1 << 20))
      ->group("Identity (StatefulSet)");
  app->add_option("--service", flags->service,
                  "headless Service name (default RINGD_SERVICE, else the StatefulSet's name)")
      ->group("Identity (StatefulSet)");
  app->add_option("--namespace", flags->namespace_name,
                  "Kubernetes namespace (default POD_NAMESPACE, else default)")
      ->group("Identity (StatefulSet)");
  app->add_option("--cluster-domain", flags->cluster_domain,
                  "cluster DNS domain (default RINGD_CLUSTER_DOMAIN, else cluster.local)")
      ->group("Identity (StatefulSet)");
}

bool split_at_double_dash(int argc, const char* const* argv, std::vector<std::string>* before,
                          std::vector<std::string>* after) {
  int i = 0;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) before->emplace_back(argv[i]);
  const bool found = i < argc;
  for (++i; i < argc; ++i) after->emplace_back(argv[i]);
  return found;
}

int parse_words(CLI::App* app, const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  for (const std::string& word : words) argv.push_back(word.c_str());
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& error) {
    return app->exit(error) == 0 ? 0 : kLaunchUsage;
  }
  return -1;
}

void print_pod_error(const char* command, const std::exception& error) {
  std::fflush(stdout);
  const auto* ringd_error = dynamic_cast<const Error*>(&error);
  if (ringd_error && ringd_error->code() != ErrorCode::kInvalidArgument) {
    std::fprintf(stderr, "ringd %s: error: %s: %s\n", command, error_code_name(ringd_error->code()),
                 error.what());
  } else {
    std::fprintf(stderr, "ringd %s: error: %s\n", command, error.what());
  }
  std::fflush(stderr);
}

bool is_pod_command(int argc, const char* const* argv) {
  if (argc < 2) return false;
  const std::string word = argv[1];
  return word == "agent" || word == "exec" || word == "hostfile" || word == "launch" ||
         word == "status";
}

int run_pod_command(int argc, const char* const* argv) {
  const std::string word = argv[1];
  if (word == "agent") return run_agent_command(argc, argv);
  if (word == "exec") return run_exec_command(argc, argv);
  if (word == "hostfile") return run_hostfile_command(argc, argv);
  if (word == "status") return run_status_command(argc, argv);
  return run_launch_command(argc, argv);
}

}  // namespace ringd::cli
