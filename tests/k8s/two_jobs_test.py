#!/usr/bin/env python3
"""Two ringd jobs in one namespace (issue 17): any namePrefix or nameSuffix gives consistent names
everywhere, and each pod's peers resolve to its own job.

Renders, from a copy of k8s/ with a placeholder secret, the ps overlay (the one with the most
cross-references: workers, servers, two Services, --ps-servers) twice, as job1 (namePrefix job1-)
and job2 (nameSuffix -two), and both together as one namespace would hold them; then the same for
the cpu-job overlay (the Job form: pods found through the Job's subdomain). Then:
  * each job alone passes tests/k8s/check_manifests.py (RINGD_SERVICE = serviceName, RINGD_REPLICAS,
    --ps-servers after the kubelet's $(VAR) expansion = the servers' pods, ...);
  * together: no two objects share a kind and name, strict kubernetes-validate passes, and for each
    job the names its pods would look up (pod 0's peers <set>-<i>.<RINGD_SERVICE>, the workers'
    --ps-servers) are pods of that job's own StatefulSets, published by that job's own Services,
    whose selectors pick none of the other job's pods;
  * the same checks report a job whose RINGD_SERVICE names the other job's Service (they can fail).

  two_jobs_test.py REPO_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

JOBS = {"job1": "namePrefix: job1-", "job2": "nameSuffix: -two"}
OVERLAYS = ("ps", "cpu-job")
WORKLOADS = ("StatefulSet", "Job")


def run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def lookups(docs, manifests):
    """(who, host) for every name a job's pods resolve: pod 0's peers and --ps-servers' entries."""
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"]
    found = []
    for ss in (d for d in docs if d["kind"] in WORKLOADS):
        for container in ss["spec"]["template"]["spec"]["containers"]:
            env = manifests.environment(container, configmaps)
            words = container.get("command", []) + container.get("args", [])
            if words[:2] == ["ringd", "agent"]:
                for i in range(int(env.get("RINGD_REPLICAS", "0"))):
                    found.append((f"{ss['metadata']['name']} peers",
                                  f"{ss['metadata']['name']}-{i}.{env.get('RINGD_SERVICE')}"))
            if "--ps-servers" in words:
                servers = manifests.expand(words[words.index("--ps-servers") + 1], env)
                for entry in servers.split(","):
                    found.append((f"{ss['metadata']['name']} --ps-servers", entry.split(":")[0]))
    return found


def problems_of(together, jobs, manifests):
    """Every way in which one job's lookups leave the job, in the rendering of both."""
    problems = []
    seen = set()
    for d in together:
        key = (d["kind"], d["metadata"]["name"])
        if key in seen:
            problems.append(f"two objects are {key[0]}/{key[1]}")
        seen.add(key)
    sets = {d["metadata"]["name"]: d for d in together if d["kind"] in WORKLOADS}
    services = {d["metadata"]["name"]: d for d in together if d["kind"] == "Service"}
    for job, own in jobs.items():
        own_names = {(d["kind"], d["metadata"]["name"]) for d in own}
        for who, host in lookups(own, manifests):
            pod, _, service = host.partition(".")
            set_name, _, ordinal = pod.rpartition("-")
            ss = sets.get(set_name)
            where = f"{job}: {who}: {host}"
            if ss is None or not ordinal.isdigit() or int(ordinal) >= manifests.replicas_of(ss):
                problems.append(f"{where}: no such pod")
                continue
            if (ss["kind"], set_name) not in own_names:
                problems.append(f"{where}: a pod of another job's {ss['kind']}/{set_name}")
            if manifests.service_of(ss) != service:
                problems.append(f"{where}: {ss['kind']}/{set_name}'s pods are published under "
                                f"{manifests.service_of(ss)}, not {service}: no DNS name")
            svc = services.get(service)
            if svc is None or ("Service", service) not in own_names:
                problems.append(f"{where}: Service {service} is not this job's")
                continue
            selector = svc["spec"].get("selector", {})
            for other_name, other in sets.items():
                labels = other["spec"]["template"]["metadata"].get("labels", {})
                mine = other_name == set_name
                if selects(selector, labels) != mine:
                    problems.append(f"{where}: Service {service}'s selector {selector} "
                                    f"{'misses' if mine else 'also picks'} the pods of "
                                    f"{other['kind']}/{other_name}")
    return problems


def main():
    repo = os.path.abspath(sys.argv[1])
    run([os.path.join(repo, "scripts", "validate_k8s.sh"), "--install-only"], cwd=repo)
    venv = os.path.join(repo, "build-tools", "k8s-venv", "bin")
    sys.path.insert(0, os.path.join(repo, "tests", "k8s"))
    sys.path.insert(0, os.path.join(repo, "build-tools", "k8s-venv", "lib",
                                    f"python{sys.version_info.major}.{sys.version_info.minor}",
                                    "site-packages"))
    try:
        import yaml
    except ImportError:
        # The venv's python may differ from this one: re-run this test under it.
        os.execv(os.path.join(venv, "python"), [os.path.join(venv, "python"), *sys.argv])
    import check_manifests as manifests

    for overlay in OVERLAYS:
        two_jobs(repo, venv, yaml, manifests, overlay)


def two_jobs(repo, venv, yaml, manifests, overlay):
    work = tempfile.mkdtemp(prefix="ringd-two-jobs-")
    try:
        tree = os.path.join(work, "k8s")
        shutil.copytree(os.path.join(repo, "k8s"), tree)
        with open(os.path.join(tree, "base", "job-secret"), "w") as f:
            f.write("two-jobs-test-placeholder-not-a-secret\n")
        for job, naming in JOBS.items():
            os.makedirs(os.path.join(tree, "jobs", job))
            with open(os.path.join(tree, "jobs", job, "kustomization.yaml"), "w") as f:
                f.write(f"{naming}\nresources:\n  - ../../overlays/{overlay}\n")
        os.makedirs(os.path.join(tree, "jobs", "both"))
        with open(os.path.join(tree, "jobs", "both", "kustomization.yaml"), "w") as f:
            f.write("resources:\n" + "".join(f"  - ../{job}\n" for job in JOBS))
        rendered = {}
        for name in [*JOBS, "both"]:
            path = os.path.join(work, f"{name}.yaml")
            with open(path, "w") as f:
                f.write(run([os.path.join(venv, "kubectl"), "kustomize",
                             os.path.join(tree, "jobs", name)]))
            rendered[name] = path

        # Each job alone is a whole, consistent ringd job.
        run([os.path.join(venv, "python"), os.path.join(repo, "tests", "k8s", "check_manifests.py"),
             "--launcher-doc", os.path.join(repo, "docs", "launcher.md"), "--tunables-doc",
             os.path.join(repo, "docs", "tunables.md"), rendered["job1"], rendered["job2"]])
        run([os.path.join(venv, "kubernetes-validate"), "--strict", "--quiet",
             "--kubernetes-version", "1.32.0", rendered["both"]])

        load = lambda name: [d for d in yaml.safe_load_all(open(rendered[name])) if d]
        jobs = {job: load(job) for job in JOBS}
        together = load("both")
        problems = problems_of(together, jobs, manifests)
        if problems:
            sys.exit(f"FAIL: two {overlay} jobs in one namespace:\n  " + "\n  ".join(problems))
        hosts = [host for job in jobs.values() for _, host in lookups(job, manifests)]
        print(f"ok   two {overlay} jobs side by side: {len(together)} objects, {len(hosts)} "
              f"lookups, each inside its own job "
              f"({', '.join(sorted(set(h.split('.')[1] for h in hosts)))})")

        # The check can fail: job2's RINGD_SERVICE pointed at job1's Service.
        for d in jobs["job2"] + together:
            if d["kind"] == "ConfigMap" and "two" in d["metadata"]["name"]:
                d["data"]["RINGD_SERVICE"] = "job1-ringd"
        problems = problems_of(together, jobs, manifests)
        if not any("job2" in p and "job1-ringd" in p for p in problems):
            sys.exit(f"FAIL: job2 looking up job1's Service went unreported: {problems}")
        print(f"ok   {overlay}: job2 pointed at job1's Service is reported ({len(problems)} "
              "problems)")
    finally:
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
