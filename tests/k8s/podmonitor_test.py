#!/usr/bin/env python3
"""k8s/monitoring/podmonitor.yaml scrapes what the agents serve: its selector picks the worker
pods of the base StatefulSet (and so of every overlay and of the Job form, which keep those
labels), and its endpoint is the agent's named HTTP port and /metrics (docs/launcher.md).

  podmonitor_test.py REPO_ROOT
"""
import os
import subprocess
import sys


def main():
    repo = os.path.abspath(sys.argv[1])
    try:
        import yaml
    except ImportError:
        # PyYAML comes with the k8s tools' environment (scripts/k8s_tools_requirements.txt).
        done = subprocess.run([os.path.join(repo, "scripts", "validate_k8s.sh"), "--install-only"],
                              cwd=repo, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"FAIL: validate_k8s.sh --install-only: {done.stderr}")
        python = os.path.join(repo, "build-tools", "k8s-venv", "bin", "python")
        os.execv(python, [python, *sys.argv])
    with open(os.path.join(repo, "k8s", "monitoring", "podmonitor.yaml")) as f:
        monitor = yaml.safe_load(f)
    with open(os.path.join(repo, "k8s", "base", "statefulset.yaml")) as f:
        workload = yaml.safe_load(f)
    problems = []
    if (monitor.get("kind"), monitor.get("apiVersion")) != ("PodMonitor",
                                                          "monitoring.coreos.com/v1"):
        problems.append(f"not a monitoring.coreos.com/v1 PodMonitor: {monitor.get('kind')}")
    pod = workload["spec"]["template"]
    labels = pod["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"selector {selector} does not pick the ringd pods (labels {labels})")
    if "app.kubernetes.io/instance" in selector:
        problems.append("selector names one job's instance: it would miss prefixed jobs")
    ports = {p.get("name"): p["containerPort"] for c in pod["spec"]["containers"]
             for p in c.get("ports", [])}
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        if endpoint.get("port") not in ports:
            problems.append(f"endpoint port {endpoint.get('port')!r} is none of the pod's named "
                            f"ports {sorted(ports)}")
        if endpoint.get("path") != "/metrics":
            problems.append(f"endpoint path {endpoint.get('path')!r} is not /metrics")
    if problems:
        sys.exit("FAIL: k8s/monitoring/podmonitor.yaml:\n  " + "\n  ".join(problems))
    print(f"ok   the PodMonitor scrapes port {monitor['spec']['podMetricsEndpoints'][0]['port']} "
          f"({ports.get('http')}) /metrics of the pods labelled {selector}")


if __name__ == "__main__":
    main()
