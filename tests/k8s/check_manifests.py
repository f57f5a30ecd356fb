#!/usr/bin/env python3
"""Checks rendered k8s/ overlays for what a schema cannot see.

kubernetes-validate says a manifest is well-formed Kubernetes; this says it is a working ringd job:
the pitfalls of issue 7 stay fixed (headless Service publishing not-ready addresses, Parallel pod
management, /dev/shm in memory, non-root, the completion marker's volume), the pieces agree with
each other (replicas and RINGD_REPLICAS, the Service's name and RINGD_SERVICE, ports and probes)
and with docs/launcher.md (ports, paths, variables), and, given the ringd binary, every flag the
manifests pass to ringd exists in that binary's --help.

  check_manifests.py [--ringd BINARY] [--dockerfile F] [--launcher-doc F] [--tunables-doc F]
                     RENDERED.yaml...

Run by scripts/validate_k8s.sh on each overlay's `kubectl kustomize` output (the file name is the
overlay's). Prints every problem, naming overlay, object and field; exits 1 if there is any.
"""
import argparse
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
import ringd_cli  # noqa: E402  (tests/testing/ringd_cli.py, shared with tests/docs/)

# docs/launcher.md, "Ports, paths and variables the manifests use".
EXEC_PORT = 29400
HTTP_PORT = 29401
STATE_DIR = "/var/lib/ringd"
SECRET_VARIABLES = ("RINGD_JOB_SECRET", "RINGD_JOB_SECRET_FILE")
MIN_SHM_BYTES = 256 * 1024**2

# Flags the manifests use that a command announces but does not have yet: reported as notes while
# missing, so that a manifest may follow a documented contract ahead of the code. Each entry says
# where the flag is promised; once the binary has the flag the entry is noted as stale.
PENDING_FLAGS = {}  # (command, flag) -> why a manifest may use it before the binary has it

UNITS = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "K": 1000, "M": 1000**2,
         "G": 1000**3, "T": 1000**4}


def quantity_bytes(text):
    match = re.fullmatch(r"(\d+)([KMGT]i?)?", str(text))
    if not match:
        return None
    return int(match.group(1)) * UNITS.get(match.group(2) or "", 1)


def expand(text, env):
    """The kubelet's expansion of $(NAME) in command and args: a defined variable's value; an
    undefined one stays as written; $$ is a literal $."""
    def one(match):
        if match.group(0) == "$$":
            return "$"
        value = env.get(match.group(1))
        return match.group(0) if value is None else value
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def environment(container, configmaps, missing=None):
    """The container's environment as name -> value ("field:<path>" when set from a field, None
    from a key); the ConfigMaps its envFrom names but `configmaps` lacks go to `missing`."""
    env = {}
    for source in container.get("envFrom", []):
        name = source.get("configMapRef", {}).get("name")
        matching = [c for c in configmaps if c["metadata"]["name"] == name]
        if name and not matching and missing is not None:
            missing.append(name)
        for c in matching:
            env.update(c.get("data", {}))
    for item in container.get("env", []):
        env[item["name"]] = item.get("value")
        field = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if field:
            env[item["name"]] = "field:" + field
    return env


def replicas_of(workload):
    """How many pods: a StatefulSet's replicas, an Indexed Job's completions."""
    spec = workload["spec"]
    if workload["kind"] == "Job":
        return spec.get("completions", 1)
    return spec.get("replicas", 1)


def service_of(workload):
    """The headless Service that gives the pods their DNS names: a StatefulSet's serviceName, a
    Job's pods' subdomain."""
    if workload["kind"] == "Job":
        return workload["spec"]["template"]["spec"].get("subdomain")
    return workload["spec"].get("serviceName")


class Checker:
    def __init__(self, args):
        self.args = args
        self.problems = []
        self.notes = []
        self.ringd = ringd_cli.RingdHelp(args.ringd) if args.ringd else None
        self.image_uid = self.dockerfile_uid(args.dockerfile) if args.dockerfile else None
        self.doc = open(args.launcher_doc).read() if args.launcher_doc else None
        # Every RINGD_* variable the docs describe: a manifest setting another is a typo that
        # ringd would never read.
        documented = "".join(open(p).read() for p in (args.launcher_doc, args.tunables_doc) if p)
        self.variables = set(re.findall(r"RINGD_[A-Z0-9_]+", documented)) if documented else None

    def fail(self, where, what):
        self.problems.append(f"{where}: {what}")

    # ---- inputs ---------------------------------------------------------------------------------
    @staticmethod
    def dockerfile_uid(path):
        users = [line.split()[1] for line in open(path) if line.startswith("USER ")]
        if not users:
            return None
        uid = users[-1].split(":")[0]
        return int(uid) if uid.isdigit() else uid

    # ---- one overlay ------------------------------------------------------------------------------
    def check_overlay(self, path):
        overlay = os.path.splitext(os.path.basename(path))[0]
        docs = [d for d in yaml.safe_load_all(open(path)) if d]
        by_kind = {}
        for d in docs:
            by_kind.setdefault(d["kind"], []).append(d)
        services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
        configmaps = by_kind.get("ConfigMap", [])
        secrets = {s["metadata"]["name"]: s for s in by_kind.get("Secret", [])}
        sets = by_kind.get("StatefulSet", []) + by_kind.get("Job", [])
        if not sets:
            self.fail(overlay, "no StatefulSet or Job")
        agents = 0
        for ss in sets:
            where = f"{overlay}: {ss['kind']}/{ss['metadata']['name']}"
            spec = ss["spec"]
            self.check_service(where, ss, services)
            if ss["kind"] == "Job":
                self.check_job(where, spec)
            elif spec.get("podManagementPolicy") != "Parallel":
                self.fail(where, "podManagementPolicy is not Parallel (pods would start one by one)")
            pod = spec["template"]["spec"]
            self.check_security(where, pod)
            claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
            volumes = {v["name"] for v in pod.get("volumes", [])} | claims
            for container in pod["containers"]:
                cwhere = f"{where} container {container['name']}"
                for mount in container.get("volumeMounts", []):
                    if mount["name"] not in volumes:
                        self.fail(cwhere, f"mounts volume {mount['name']!r} at "
                                          f"{mount['mountPath']}, which the pod does not have")
                env = self.environment(cwhere, container, configmaps)
                if self.variables is not None:
                    for name in sorted(env):
                        if name.startswith("RINGD_") and name not in self.variables:
                            self.fail(cwhere, f"sets {name}, which neither docs/tunables.md nor "
                                              "docs/launcher.md describes (a typo?)")
                self.check_secret(cwhere, container, pod, env, secrets)
                command = container.get("command", []) + container.get("args", [])
                if command[:1] != ["ringd"]:
                    self.fail(cwhere, f"runs {command[:2]}, not ringd")
                    continue
                if command[:2] == ["ringd", "agent"]:
                    agents += 1
                    self.check_agent(cwhere, ss, container, pod, env)
                    self.check_recovery(cwhere, command)
                self.check_flags(cwhere, command)
        self.check_ps_servers(overlay, sets, configmaps)
        if agents != 1:
            self.fail(overlay, f"{agents} StatefulSets or Jobs run `ringd agent`; exactly one must "
                               "(pod 0 of it launches the job)")

    def check_job(self, where, spec):
        """The Job form (components/indexed-job): one pod per index, all at once, DNS names like
        a StatefulSet's, done when pod 0 (launch) succeeds, failed when launch fails, a lost pod
        replaced without counting as a failure."""
        if spec.get("completionMode") != "Indexed":
            self.fail(where, "completionMode is not Indexed (pods would have no stable names)")
        if spec.get("parallelism") != spec.get("completions"):
            self.fail(where, f"parallelism {spec.get('parallelism')} != completions "
                             f"{spec.get('completions')}: the pods would not all run at once")
        pod = spec["template"]["spec"]
        if pod.get("restartPolicy") != "Never":
            self.fail(where, "restartPolicy is not Never (the pod failure policy needs it)")
        rules = spec.get("successPolicy", {}).get("rules", [])
        if not any(r.get("succeededIndexes") == "0" for r in rules):
            self.fail(where, "no success policy on index 0: the Job would wait for every pod's "
                             "agent to exit, which only pod 0's does")
        failure_rules = spec.get("podFailurePolicy", {}).get("rules", [])
        if not any(r.get("action") == "Ignore" and
                   any(c.get("type") == "DisruptionTarget" for c in r.get("onPodConditions", []))
                   for r in failure_rules):
            self.fail(where, "a pod lost to its node or evicted would count as a failure (no "
                             "Ignore rule for DisruptionTarget)")
        for container in pod["containers"]:
            words = container.get("command", []) + container.get("args", [])
            if words[:2] == ["ringd", "agent"] and "--exit-with-launch" not in words:
                self.fail(where, "the agent lacks --exit-with-launch: pod 0 would never end")

    def check_ps_servers(self, overlay, sets, configmaps):
        """--ps-servers names exactly the pods of the StatefulSet that runs `ringd ps`, in order
        (after the kubelet's $(VAR) expansion from the container's environment)."""
        servers = [ss for ss in sets
                   if any(c.get("command", [])[:2] == ["ringd", "ps"]
                          for c in ss["spec"]["template"]["spec"]["containers"])]
        for ss in sets:
            for container in ss["spec"]["template"]["spec"]["containers"]:
                words = container.get("command", []) + container.get("args", [])
                if "--ps-servers" not in words:
                    continue
                where = f"{overlay}: StatefulSet/{ss['metadata']['name']} --ps-servers"
                env = self.environment(where, container, configmaps)
                listed = expand(words[words.index("--ps-servers") + 1], env).split(",")
                if len(servers) != 1:
                    self.fail(where, f"{len(servers)} StatefulSets run `ringd ps`, expected one")
                    continue
                ps = servers[0]
                name, service = ps["metadata"]["name"], ps["spec"]["serviceName"]
                ports = [p["containerPort"] for c in ps["spec"]["template"]["spec"]["containers"]
                         for p in c.get("ports", [])]
                expected = [f"{name}-{i}.{service}:{ports[0] if ports else '?'}"
                            for i in range(ps["spec"].get("replicas", 1))]
                if listed != expected:
                    self.fail(where, f"lists {','.join(listed)}, but StatefulSet/{name} has the "
                                     f"servers {','.join(expected)}")

    def check_service(self, where, workload, services):
        spec = workload["spec"]
        name = service_of(workload)
        service = services.get(name)
        if service is None:
            self.fail(where, f"serviceName/subdomain {name!r} names no Service in this overlay")
            return
        if service["spec"].get("clusterIP") != "None":
            self.fail(where, f"Service {name} is not headless (clusterIP: None): pods get no DNS "
                             "names of their own")
        if service["spec"].get("publishNotReadyAddresses") is not True:
            self.fail(where, f"Service {name} lacks publishNotReadyAddresses: true (names would "
                             "not resolve until pods are Ready, and launch waits for them)")
        labels = spec["template"]["metadata"].get("labels", {})
        selector = service["spec"].get("selector", {})
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            self.fail(where, f"Service {name}'s selector {selector} does not select its pods "
                             f"(labels {labels})")

    def check_security(self, where, pod):
        context = pod.get("securityContext", {})
        for container in pod["containers"]:
            cwhere = f"{where} container {container['name']}"
            csc = container.get("securityContext", {})
            uid = csc.get("runAsUser", context.get("runAsUser"))
            added = csc.get("capabilities", {}).get("add", [])
            if csc.get("allowPrivilegeEscalation") is not False:
                self.fail(cwhere, "allowPrivilegeEscalation is not false")
            if "ALL" not in csc.get("capabilities", {}).get("drop", []):
                self.fail(cwhere, "capabilities do not drop ALL")
            if uid == 0:
                # Root only for CAP_IPC_LOCK (RDMA's locked memory), the one reason there is.
                if added != ["IPC_LOCK"]:
                    self.fail(cwhere, f"runs as root with capabilities {added}: root is allowed "
                                      "only to hold IPC_LOCK (the rdma overlay)")
                continue
            if context.get("runAsNonRoot") is not True and csc.get("runAsNonRoot") is not True:
                self.fail(cwhere, "runAsNonRoot is not true")
            if added:
                self.fail(cwhere, f"adds capabilities {added} as non-root: Kubernetes grants "
                                  "them to root only, so they would do nothing")
            if self.image_uid is not None and uid != self.image_uid:
                self.fail(cwhere, f"runAsUser {uid} is not the Dockerfile's USER {self.image_uid}")

    def environment(self, where, container, configmaps):
        missing = []
        env = environment(container, configmaps, missing)
        for name in missing:
            self.fail(where, f"envFrom names ConfigMap {name!r}, which this overlay lacks")
        return env

    def check_secret(self, where, container, pod, env, secrets):
        if not any(v in env for v in SECRET_VARIABLES):
            self.fail(where, "neither RINGD_JOB_SECRET nor RINGD_JOB_SECRET_FILE is set: the job "
                             "would run unauthenticated")
            return
        path = env.get("RINGD_JOB_SECRET_FILE")
        if not path:
            return
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        directory, key = os.path.split(path)
        volume_name = mounts.get(directory)
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        secret_name = volumes.get(volume_name, {}).get("secret", {}).get("secretName")
        if secret_name is None:
            self.fail(where, f"RINGD_JOB_SECRET_FILE={path}: no Secret volume is mounted at "
                             f"{directory}")
        elif secret_name not in secrets:
            self.fail(where, f"the secret volume names Secret {secret_name!r}, not in this overlay")
        elif key not in secrets[secret_name].get("data", {}):
            self.fail(where, f"RINGD_JOB_SECRET_FILE={path}: Secret {secret_name} has no key {key!r}")

    def check_agent(self, where, ss, container, pod, env):
        replicas = replicas_of(ss)
        if env.get("RINGD_REPLICAS") != str(replicas):
            self.fail(where, f"RINGD_REPLICAS={env.get('RINGD_REPLICAS')} but the {ss['kind']} has "
                             f"{replicas} pods")
        service = service_of(ss)
        if env.get("RINGD_SERVICE", service) != service:
            self.fail(where, f"RINGD_SERVICE={env.get('RINGD_SERVICE')} but the pods' Service is "
                             f"{service}")
        if env.get("POD_NAME") != "field:metadata.name":
            self.fail(where, "POD_NAME is not the downward API's metadata.name (the ordinal comes "
                             "from it; with hostNetwork the host name is the node's)")
        if env.get("POD_NAMESPACE") != "field:metadata.namespace":
            self.fail(where, "POD_NAMESPACE is not the downward API's metadata.namespace")
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        expected = {"exec": int(env.get("RINGD_AGENT_PORT", EXEC_PORT)),
                    "http": int(env.get("RINGD_HTTP_PORT", HTTP_PORT))}
        for name, port in expected.items():
            if ports.get(name) != port:
                self.fail(where, f"container port {name!r} is {ports.get(name)!r}, the agent "
                                 f"listens on {port}")
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            get = container.get(probe, {}).get("httpGet", {})
            if get.get("path") != path or get.get("port") not in ("http", expected["http"]):
                self.fail(where, f"{probe} is not GET {path} on the agent's HTTP port")
        mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        shm = volumes.get(mounts.get("/dev/shm"), {}).get("emptyDir")
        if shm is None or shm.get("medium") != "Memory":
            self.fail(where, "/dev/shm is not an emptyDir with medium Memory (the runtime's "
                             "default is 64 MiB)")
        elif (quantity_bytes(shm.get("sizeLimit", "0")) or 0) < MIN_SHM_BYTES:
            self.fail(where, f"/dev/shm sizeLimit {shm.get('sizeLimit')} is under 256Mi")
        metrics = env.get("RINGD_METRICS_FILE")
        if not metrics or not metrics.startswith(STATE_DIR + "/"):
            self.fail(where, f"RINGD_METRICS_FILE={metrics}: it must name a file in {STATE_DIR} "
                             "(rank 0 writes it, the agent serves it under /metrics)")
        if STATE_DIR not in mounts:
            self.fail(where, f"nothing is mounted at {STATE_DIR}: the completion marker would not "
                             "survive a container restart")
        if self.doc is not None:
            for text in (str(EXEC_PORT), str(HTTP_PORT), STATE_DIR, "RINGD_JOB_SECRET_FILE"):
                if text not in self.doc:
                    self.fail(where, f"uses {text}, which docs/launcher.md does not mention")

    def check_recovery(self, where, command):
        """A training job recovers from a lost pod (k8s/README.md, "When a pod is lost"): launch
        restarts it (--max-restarts > 0) and rank 0 checkpoints periodically on the job volume,
        which --resume then reads. Parameter-server jobs are exempt: a restarted worker job would
        meet servers that kept the old job's state."""
        words = command[2:]
        if words[:1] != ["--"] or "--" not in words[1:]:
            return
        split = words.index("--", 1)
        launch, job = words[1:split], words[split + 1:]
        if job[:2] != ["ringd", "train"] or "ps" in [b for a, b in zip(job, job[1:])
                                                        if a == "--mode"]:
            return

        def value(flags, name):
            for a, b in zip(flags, flags[1:]):
                if a == name:
                    return b
            return None
        restarts = value(launch, "--max-restarts")
        if restarts is None or not restarts.isdigit() or int(restarts) < 1:
            self.fail(where, f"launch's --max-restarts is {restarts}: a lost pod ends the training "
                             "job for good")
        directory = value(job, "--checkpoint-dir") or ""
        every = value(job, "--checkpoint-every")
        if not directory.startswith(STATE_DIR + "/"):
            self.fail(where, f"ringd train's --checkpoint-dir is {directory or 'not set'}: a "
                             f"restart resumes only from checkpoints in {STATE_DIR}")
        if every is None or not every.isdigit() or int(every) < 1:
            self.fail(where, f"ringd train's --checkpoint-every is {every}: a restart would "
                             "repeat the whole run")

    def check_flags(self, where, command):
        """Every ringd command in the pod's command exists, and every --flag given to it is in
        that command's --help (tests/testing/ringd_cli.py)."""
        if self.ringd is None:
            return

        def pending(name, flag):
            why = PENDING_FLAGS.get((name, flag))
            if why:
                self.notes.append(f"{where}: `{name}` {flag} is not built yet ({why})")
            return bool(why)

        for words in ringd_cli.split_commands(command):
            if len(words) > 1 and self.ringd.text(words[1:2]) is None:
                self.notes.append(f"{where}: `{' '.join(words[:2])}` is not in this ringd binary: "
                                  "its flags are not checked")
                continue
            for problem in ringd_cli.check_command(self.ringd, words, allow=pending):
                self.fail(where, problem)
        for (name, flag) in PENDING_FLAGS:
            help_text = self.ringd.text(name.split()[1:])
            if help_text and flag in ringd_cli.defined_flags(help_text):
                self.notes.append(f"`{name}` now has {flag}: remove it from PENDING_FLAGS in "
                                  "tests/k8s/check_manifests.py")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ringd", help="check the manifests' ringd flags against this binary")
    parser.add_argument("--dockerfile", help="the Dockerfile whose USER the pods must run as")
    parser.add_argument("--launcher-doc", help="docs/launcher.md")
    parser.add_argument("--tunables-doc", help="docs/tunables.md")
    parser.add_argument("rendered", nargs="+", help="one overlay's kubectl kustomize output each")
    args = parser.parse_args()
    checker = Checker(args)
    for path in args.rendered:
        try:
            checker.check_overlay(path)
        except (KeyError, TypeError, ValueError, yaml.YAMLError) as error:
            checker.fail(os.path.basename(path), f"cannot be checked: {type(error).__name__} "
                                                 f"{error}")
    for note in sorted(set(checker.notes)):
        print(f"check_manifests: note: {note}", file=sys.stderr)
    for problem in checker.problems:
        print(f"check_manifests: FAILED: {problem}", file=sys.stderr)
    checked = "flags checked against " + args.ringd if args.ringd else "flags not checked"
    print(f"check_manifests: {len(args.rendered)} overlays, {len(checker.problems)} problems "
          f"({checked})", file=sys.stderr)
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
