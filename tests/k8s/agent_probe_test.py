#!/usr/bin/env python3
"""The cpu overlay's pod, as Kubernetes would start it, answers the probes the manifest declares.

Renders k8s/overlays/cpu, takes the StatefulSet's container exactly as written (command, args,
ConfigMap environment, the downward API's POD_NAME/POD_NAMESPACE for pod ringd-1, the Secret's
file where RINGD_JOB_SECRET_FILE points, with the mount emulated by a temporary directory) and runs
it with the built ringd in a network namespace of its own (the manifest's fixed ports cannot clash
with anything else on this machine). Then, like the kubelet: the readiness probe's GET answers 200
within periodSeconds x failureThreshold, the liveness probe's GET answers 200, /metrics is
Prometheus text, the exec port accepts connections, and SIGTERM ends the agent within the pod's
terminationGracePeriodSeconds.

Pod 1, not pod 0: pod 0 would also run `ringd launch`, which needs the other pods (the launcher's
end-to-end test covers that).

  agent_probe_test.py REPO_ROOT RINGD_BINARY
Exits 77 (skipped, saying why) without root or iproute2, or when the binary has no `ringd agent`.
"""
import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def in_namespace(namespace, code, timeout=10):
    """Runs Python `code` inside the namespace; returns (exit code, output)."""
    result = subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", code],
                            capture_output=True, text=True, timeout=timeout)
    return result.returncode, (result.stdout + result.stderr).strip()


def http_get(namespace, port, path):
    code = ("import urllib.request, urllib.error, sys\n"
            "try:\n"
            f"    r = urllib.request.urlopen('http://127.0.0.1:{port}{path}', timeout=2)\n"
            "    print(r.status); print(r.read().decode(errors='replace'))\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n"
            "except OSError as e:\n"
            "    print(0); print(e)\n")
    _, output = in_namespace(namespace, code)
    status, _, body = output.partition("\n")
    return int(status) if status.isdigit() else 0, body


def render_cpu(repo, tmp):
    tools = subprocess.run([os.path.join(repo, "scripts", "validate_k8s.sh"), "--install-only"],
                           cwd=repo, capture_output=True, text=True, timeout=540)
    check(tools.returncode == 0, f"validate_k8s.sh --install-only: {tools.stderr}")
    tree = os.path.join(tmp, "k8s")
    shutil.copytree(os.path.join(repo, "k8s"), tree, ignore=shutil.ignore_patterns("job-secret"))
    with open(os.path.join(tree, "base", "job-secret"), "w") as f:
        f.write("agent-probe-test-secret\n")
    tools_dir = os.environ.get("RINGD_TOOLS_DIR", "build-tools")
    venv = os.path.join(repo, tools_dir, "k8s-venv", "bin")
    rendered = subprocess.run([os.path.join(venv, "kubectl"), "kustomize",
                               os.path.join(tree, "overlays", "cpu")],
                              capture_output=True, text=True, timeout=60)
    check(rendered.returncode == 0, f"kubectl kustomize k8s/overlays/cpu: {rendered.stderr}")
    # PyYAML lives in the tools' environment, not necessarily in this interpreter's.
    parsed = subprocess.run([os.path.join(venv, "python"), "-c",
                             "import json, sys, yaml; "
                             "print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))"],
                            input=rendered.stdout, capture_output=True, text=True, check=True)
    import json
    return json.loads(parsed.stdout)


def pod_environment(docs, container, pod_name, secret_dir):
    """The container's environment as the kubelet builds it, mounts mapped to secret_dir."""
    env = {}
    configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    for source in container.get("envFrom", []):
        env.update(configmaps[source["configMapRef"]["name"]].get("data", {}))
    fields = {"metadata.name": pod_name, "metadata.namespace": "default"}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    secret_file = env["RINGD_JOB_SECRET_FILE"]
    mount_dir, key = os.path.split(secret_file)
    secret = next(iter(secrets.values()))
    with open(os.path.join(secret_dir, key), "wb") as f:
        f.write(base64.b64decode(secret["data"][key]))
    env["RINGD_JOB_SECRET_FILE"] = os.path.join(secret_dir, key)
    return env, mount_dir


def main():
    repo, ringd = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("SKIP: needs root and iproute2 (ip netns) to give the agent its own network")
        return SKIP
    top = subprocess.run([ringd, "--help"], capture_output=True, text=True).stdout
    agent = subprocess.run([ringd, "agent", "--help"], capture_output=True, text=True)
    if agent.returncode != 0 or agent.stdout == top:
        print(f"SKIP: {ringd} has no `ringd agent` command yet")
        return SKIP

    namespace = f"ringd-k8s-probe-{os.getpid()}"
    process = None
    with tempfile.TemporaryDirectory(prefix="ringd-agent-probe-") as tmp:
        docs = render_cpu(repo, tmp)
        ss = next(d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "ringd")
        pod = ss["spec"]["template"]["spec"]
        container = pod["containers"][0]
        secret_dir = os.path.join(tmp, "secret")
        os.mkdir(secret_dir)
        env, _ = pod_environment(docs, container, "ringd-1", secret_dir)
        env["PATH"] = os.path.dirname(ringd) + ":/usr/bin:/bin"  # the image has ringd on PATH
        env["TMPDIR"] = tmp
        command = container.get("command", []) + container.get("args", [])
        check(command[:2] == ["ringd", "agent"], f"the cpu overlay's pods run {command[:2]}")
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        readiness, liveness = container["readinessProbe"], container["livenessProbe"]
        check(readiness["httpGet"]["port"] == "http" and liveness["httpGet"]["port"] == "http",
              "probes do not use the port named http")
        grace = pod.get("terminationGracePeriodSeconds", 30)

        subprocess.run(["ip", "netns", "add", namespace], check=True)
        try:
            subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"],
                           check=True)
            log = open(os.path.join(tmp, "agent.log"), "w+")
            process = subprocess.Popen(["ip", "netns", "exec", namespace, "env", "-i",
                                        *[f"{k}={v}" for k, v in env.items()], *command],
                                       stdout=log, stderr=subprocess.STDOUT, cwd=tmp)

            def agent_output():
                log.flush()
                log.seek(0)
                return log.read()[-2000:]

            # Readiness: the kubelet gives up after periodSeconds x failureThreshold (plus the
            # initial delay); so does this.
            budget = (readiness.get("initialDelaySeconds", 0) +
                      readiness.get("periodSeconds", 10) * readiness.get("failureThreshold", 3))
            deadline = time.monotonic() + budget
            status = 0
            while time.monotonic() < deadline:
                check(process.poll() is None,
                      f"`{' '.join(command)}` exited with {process.returncode} before it was "
                      f"ready:\n{agent_output()}")
                status, _ = http_get(namespace, ports["http"], readiness["httpGet"]["path"])
                if status == 200:
                    break
                time.sleep(readiness.get("periodSeconds", 10) / 4)
            check(status == 200, f"readiness GET {readiness['httpGet']['path']} on port "
                                 f"{ports['http']}: {status} after {budget} s (the kubelet would "
                                 f"keep the pod unready):\n{agent_output()}")
            status, _ = http_get(namespace, ports["http"], liveness["httpGet"]["path"])
            check(status == 200, f"liveness GET {liveness['httpGet']['path']}: {status} (the "
                                 f"kubelet would restart the container):\n{agent_output()}")
            status, body = http_get(namespace, ports["http"], "/metrics")
            check(status == 200 and "# TYPE" in body,
                  f"GET /metrics: {status}, not Prometheus text: {body[:300]!r}")
            check(re.search(r'^ringd_build_info\{version="[^"]+",mpi="(true|false)",'
                            r'ibverbs="(true|false)",cuda="(true|false)",nccl="(true|false)",'
                            r'cublas="(true|false)"\} 1$', body, re.M),
                  f"no ringd_build_info gauge in /metrics: {body[:500]!r}")
            code, output = in_namespace(
                namespace, f"import socket; socket.create_connection(('127.0.0.1', "
                           f"{ports['exec']}), timeout=2).close()")
            check(code == 0, f"the exec port {ports['exec']} refuses connections: {output}")

            # Shutdown: the kubelet sends SIGTERM and, after the grace period, SIGKILL.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                raise Failure(f"the agent ignored SIGTERM for {grace} s "
                              f"(terminationGracePeriodSeconds): the kubelet would SIGKILL it")
        finally:
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            subprocess.run(["ip", "netns", "delete", namespace], check=False)
    print(f"PASS: ringd-1 of k8s/overlays/cpu ready on :{ports['http']}"
          f"{readiness['httpGet']['path']}, live, /metrics, exec :{ports['exec']}, SIGTERM honoured")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as failure:
        print(f"FAIL: {failure}")
        sys.exit(1)
