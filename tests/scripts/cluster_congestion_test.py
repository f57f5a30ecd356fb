#!/usr/bin/env python3
"""bench/cluster.sh's RINGD_CLUSTER_CONGESTION: the nodes' default TCP congestion control (what
Open MPI, Gloo and Horovod use in the benchmarks), so that a comparison says which one the peers
ran on instead of inheriting the host's.

  1. RINGD_CLUSTER_CONGESTION=<an allowed name other than the host's>: every node's
     net.ipv4.tcp_congestion_control is that name, `up` says so, the host's stays as it was.
  2. `up` again without it (nodes left from case 1): every node has the host's default again.
  3. A name the kernel does not allow: exit 2 naming the allowed list, no node created.

Needs root and `ip netns`; exits 77 (skipped, saying why) without them. Its own names and subnet,
removed at the end.

  cluster_congestion_test.py REPO_ROOT
"""
import os
import subprocess
import sys

NODES = 2
TAG = os.getpid() % 1000
NAMES = {
    "RINGD_CLUSTER_NODE_PREFIX": f"ringd-cc{TAG}-",
    "RINGD_CLUSTER_PORT_PREFIX": f"rcc{TAG}v",
    "RINGD_CLUSTER_BRIDGE": f"rcc{TAG}br",
    "RINGD_CLUSTER_SUBNET": f"10.{150 + TAG % 50}.{TAG % 250}",
}


def sysctl(name, namespace=None):
    command = ["sysctl", "-n", name]
    if namespace:
        command = ["ip", "netns", "exec", namespace] + command
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def main():
    repo = os.path.abspath(sys.argv[1])
    cluster_sh = os.path.join(repo, "bench", "cluster.sh")
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)", flush=True)
        return 77
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        print("SKIP: `ip netns` does not work here", flush=True)
        return 77
    host = sysctl("net.ipv4.tcp_congestion_control")
    allowed = sysctl("net.ipv4.tcp_allowed_congestion_control").split()
    others = [name for name in allowed if name != host]
    if not others:
        print(f"SKIP: the kernel allows only {host}", flush=True)
        return 77
    chosen = others[0]
    namespaces = [NAMES["RINGD_CLUSTER_NODE_PREFIX"] + str(i) for i in range(NODES)]
    failures = []

    def cluster(*args, **extra):
        env = {k: v for k, v in os.environ.items() if k != "RINGD_CLUSTER_CONGESTION"}
        env.update(NAMES, **extra)
        return subprocess.run([cluster_sh, *args], env=env, capture_output=True, text=True,
                              timeout=60)

    def check(condition, message):
        if not condition:
            failures.append(message)

    try:
        done = cluster("up", str(NODES), "1gbit", RINGD_CLUSTER_CONGESTION=chosen)
        check(done.returncode == 0, f"up with {chosen}: exit {done.returncode}: {done.stderr}")
        check(f"tcp congestion control {chosen}" in done.stderr, f"up does not say {chosen}: "
              f"{done.stderr}")
        for ns in namespaces:
            check(sysctl("net.ipv4.tcp_congestion_control", ns) == chosen, f"{ns} is not {chosen}")
        check(sysctl("net.ipv4.tcp_congestion_control") == host, "the host's default changed")

        done = cluster("up", str(NODES), "1gbit")
        check(done.returncode == 0, f"up without a name: exit {done.returncode}: {done.stderr}")
        for ns in namespaces:
            got = sysctl("net.ipv4.tcp_congestion_control", ns)
            check(got == host, f"{ns} kept {got} after up without a name (host: {host})")
        cluster("down", str(NODES))

        done = cluster("up", str(NODES), "1gbit", RINGD_CLUSTER_CONGESTION="nosuchcc")
        check(done.returncode == 2 and "RINGD_CLUSTER_CONGESTION=nosuchcc" in done.stderr and
              " ".join(allowed) in done.stderr,
              f"a name the kernel does not allow: exit {done.returncode}: {done.stderr}")
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        check(not any(ns in listed for ns in namespaces), f"nodes created anyway: {listed}")
    finally:
        cluster("down", str(NODES))
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        return 1
    print(f"3 cases passed (host default {host}, nodes on {chosen})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
