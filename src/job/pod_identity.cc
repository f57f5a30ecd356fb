// A StatefulSet pod's identity (resolve_pod_identity, declared in topology.h): pod "<set>-<n>" is
// ordinal n of `replicas`, and its peers are found by DNS through the headless service. An
// Indexed Job's pod "<job>-<n>-<random>" (JOB_COMPLETION_INDEX=n) is ordinal n the same way. Every
// input can come from a flag or from the environment the manifests set (docs/launcher.md); a flag
// and a variable that both speak must agree, because a disagreement means the manifest and the
// command line describe two different jobs.
#include <cctype>
#include <cstdlib>
#include <string>

#include "job/topology.h"
#include "ringd/error.h"

namespace ringd::job {
namespace {

// The flag's value, else the variable's, else "". Both set and different is an error.
std::string pick(const char* flag, const std::string& flag_value, const char* variable,
                 const EnvLookup& env) {
  const char* env_value = env(variable);
  const std::string from_env = env_value ? env_value : "";
  if (!flag_value.empty() && !from_env.empty() && flag_value != from_env) {
    RINGD_THROW(kInvalidArgument, flag << " " << flag_value << " disagrees with " << variable << "="
                                       << from_env << "; drop one of them");
  }
  return flag_value.empty() ? from_env : flag_value;
}

// A decimal number without sign or leading zeros, or -1.
int parse_count(const std::string& text) {
  if (text.empty() || text.size() > 9 || (text.size() > 1 && text[0] == '0')) return -1;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
  }
  return std::atoi(text.c_str());
}

// An RFC 1123 label (what Kubernetes accepts for service and namespace names).
bool is_dns_label(const std::string& text) {
  if (text.empty() || text.size() > 63 || text.front() == '-' || text.back() == '-') return false;
  for (char c : text) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return true;
}

void check_label(const char* what, const std::string& value) {
  if (!is_dns_label(value)) {
    RINGD_THROW(kInvalidArgument, what << " '" << value
                                       << "' is not a DNS label (lower-case letters, digits and "
                                          "'-', at most 63 characters)");
  }
}

// "<set>-<ordinal>" -> set and ordinal; throws kInvalidArgument naming `source` and the form.
void split_pod_name(const std::string& name, const std::string& source, std::string* set_name,
                    int* ordinal) {
  const size_t dash = name.rfind('-');
  *ordinal = dash == std::string::npos ? -1 : parse_count(name.substr(dash + 1));
  if (dash == std::string::npos || dash == 0 || *ordinal < 0) {
    RINGD_THROW(kInvalidArgument,
                source << " '" << name
                       << "' is not <statefulset>-<ordinal> (e.g. ringd-2): set POD_NAME from the "
                          "downward API (metadata.name) or pass --pod-name");
  }
  *set_name = name.substr(0, dash);
  check_label("StatefulSet name", *set_name);
}

// An Indexed Job's pod (k8s/components/indexed-job): Kubernetes names it <job>-<index>-<random>
// and sets JOB_COMPLETION_INDEX; its host and DNS names are <job>-<index>, a StatefulSet pod's
// form. Returns `name` in that form; throws when it does not end in -<index>[-<random>].
std::string indexed_job_pod_name(const std::string& name, const char* index_text) {
  const int index = parse_count(index_text);
  if (index < 0) {
    RINGD_THROW(kInvalidArgument,
                "JOB_COMPLETION_INDEX '" << index_text << "' is not a whole number");
  }
  const std::string tail = "-" + std::to_string(index);
  const auto ends_with_index = [&tail](const std::string& text) {
    return text.size() > tail.size() &&
           text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with_index(name)) return name;
  const size_t dash = name.rfind('-');
  if (dash != std::string::npos && ends_with_index(name.substr(0, dash)))
    return name.substr(0, dash);
  RINGD_THROW(kInvalidArgument,
              "pod " << name << " of an Indexed Job (JOB_COMPLETION_INDEX=" << index_text
                     << ") is not named <job>" << tail << " or <job>" << tail << "-<suffix>");
}

}  // namespace

void check_explicit_pod_name(const TopologyFlags& flags, const EnvLookup& env) {
  const std::string name = pick("--pod-name", flags.pod_name, "POD_NAME", env);
  if (name.empty()) return;
  std::string set_name;
  int ordinal = -1;
  split_pod_name(name, flags.pod_name.empty() ? "POD_NAME" : "--pod-name", &set_name, &ordinal);
}

std::string pod_dns_name(const PodIdentity& pod, int ordinal) {
  return pod.set_name + "-" + std::to_string(ordinal) + "." + pod.service + "." +
         pod.namespace_name + ".svc." + pod.cluster_domain;
}

PodIdentity resolve_pod_identity(const TopologyFlags& flags, const EnvLookup& env) {
  PodIdentity pod;
  const std::string replicas_text =
      pick("--replicas", flags.replicas == -1 ? "" : std::to_string(flags.replicas),
           "RINGD_REPLICAS", env);
  if (replicas_text.empty()) {
    RINGD_THROW(kInvalidArgument,
                "the StatefulSet's replicas are unknown: set RINGD_REPLICAS (as the manifest "
                "does) or pass --replicas N");
  }
  pod.replicas = parse_count(replicas_text);
  if (pod.replicas < 1) {
    RINGD_THROW(kInvalidArgument, "replicas (--replicas / RINGD_REPLICAS) "
                                      << replicas_text << " is not a whole number of at least 1");
  }

  std::string name = pick("--pod-name", flags.pod_name, "POD_NAME", env);
  const char* source = name.empty() ? "host name (HOSTNAME)" : "pod name (--pod-name / POD_NAME)";
  if (name.empty()) {
    const char* hostname = env("HOSTNAME");
    name = hostname ? hostname : "";
    name = name.substr(0, name.find('.'));  // a FQDN host name: its first label is the pod
  }
  if (const char* job_index = env("JOB_COMPLETION_INDEX"); job_index && *job_index) {
    name = indexed_job_pod_name(name, job_index);
  }
  split_pod_name(name, source, &pod.set_name, &pod.ordinal);
  if (pod.ordinal >= pod.replicas) {
    RINGD_THROW(kInvalidArgument, "pod " << name << " has ordinal " << pod.ordinal
                                         << " but replicas (--replicas / RINGD_REPLICAS) is "
                                         << pod.replicas << " (ordinals 0.." << pod.replicas - 1
                                         << "): the StatefulSet's replicas and RINGD_REPLICAS "
                                            "disagree");
  }

  pod.service = pick("--service", flags.service, "RINGD_SERVICE", env);
  if (pod.service.empty()) pod.service = pod.set_name;
  check_label("service (--service / RINGD_SERVICE)", pod.service);
  pod.namespace_name = pick("--namespace", flags.namespace_name, "POD_NAMESPACE", env);
  if (pod.namespace_name.empty()) pod.namespace_name = "default";
  check_label("namespace (--namespace / POD_NAMESPACE)", pod.namespace_name);
  pod.cluster_domain = pick("--cluster-domain", flags.cluster_domain, "RINGD_CLUSTER_DOMAIN", env);
  if (pod.cluster_domain.empty()) pod.cluster_domain = "cluster.local";
  for (char c : pod.cluster_domain) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.')) {
      RINGD_THROW(kInvalidArgument, "cluster domain (--cluster-domain / RINGD_CLUSTER_DOMAIN) '"
                                        << pod.cluster_domain << "' is not a DNS name");
    }
  }
  return pod;
}

}  // namespace ringd::job
