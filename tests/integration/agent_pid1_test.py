#!/usr/bin/env python3
"""`ringd agent`'s PID 1 duties (docs/launcher.md), with the agent started here as a plain process:

1. Orphans are reaped: a command run through `ringd exec` leaves orphans (double fork) that end;
   each is reparented to the agent (a child subreaper, as PID 1 would be) and no zombie child of
   the agent remains.
0. --exec-port 0 and --http-port 0 mean any free port, printed in the start line (they meant the
   defaults, 29400 and 29401), and /healthz answers on the printed one.
2. SIGTERM stops the job in order: an exec command that traps SIGTERM gets it and ends; an orphan
   that escaped to a session of its own gets SIGTERM too, ignores it and is killed (SIGKILL) after
   --stop-grace; the agent exits once that is done, within a bound.

Needs only Linux /proc and Python; no root, no mpirun.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import harness
from harness import check

ORPHANS = 4
STOP_GRACE_S = 2

# The command the agent runs (allowed with --allow). Modes:
#   orphans DIR N: leaves N orphans; each waits until reparented, writes DIR/orphan-<i> = "pid ppid"
#                  and exits 0.
#   stubborn DIR:  traps SIGTERM (writes DIR/child-term, exits 0) and leaves one orphan in a
#                  session of its own that records SIGTERM (DIR/orphan-term) but does not end;
#                  writes DIR/child-ready and DIR/orphan-ready ("pid ppid") once both are set.
SCRIPT = r'''#!{python}
import os, signal, sys, time

def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)

def orphan(body):
    """Runs body() in a grandchild whose parent has exited, once it was reparented."""
    middle = os.fork()
    if middle == 0:
        middle = os.getpid()
        if os.fork() != 0:
            os._exit(0)
        signal.alarm(60)  # never outlive a failed test for long
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        deadline = time.monotonic() + 30
        while os.getppid() == middle and time.monotonic() < deadline:
            time.sleep(0.01)
        body()
        os._exit(0)
    os.waitpid(middle, 0)

mode, out = sys.argv[1], sys.argv[2]
if mode == "orphans":
    for i in range(int(sys.argv[3])):
        orphan(lambda i=i: write(f"{{out}}/orphan-{{i}}", f"{{os.getpid()}} {{os.getppid()}}"))
else:
    def stubborn():
        os.setsid()
        signal.signal(signal.SIGTERM, lambda *_: write(out + "/orphan-term", "SIGTERM"))
        write(out + "/orphan-ready", f"{{os.getpid()}} {{os.getppid()}}")
        while True:
            signal.pause()
    def on_term(*_):
        write(out + "/child-term", "SIGTERM")
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    orphan(stubborn)
    write(out + "/child-ready", str(os.getpid()))
    signal.alarm(60)
    while True:
        signal.pause()
'''


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise harness.Failure(f"{what}: not within {timeout} s")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def proc_stat(pid):
    """(state, ppid) of a process, None once it is gone (reaped)."""
    try:
        text = read(f"/proc/{pid}/stat")
    except OSError:  # it vanished while being read
        return None
    if text is None:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def zombie_children(pid):
    zombies = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = proc_stat(int(entry))
            except (OSError, ValueError):
                continue
            if stat is not None and stat == ("Z", pid):
                zombies.append(int(entry))
    return zombies


class Agent:
    def __init__(self, ringd, tmp, program):
        self.ringd = ringd
        self.env = harness.environment(RINGD_JOB_SECRET="agent-pid1-test-secret")
        self.log = open(os.path.join(tmp, "agent.log"), "w+")
        # Port 0: any free port (it used to mean the default, 29400/29401), printed at start.
        self.process = subprocess.Popen(
            [ringd, "agent", "--bind", "127.0.0.1", "--exec-port", "0", "--http-port", "0",
             "--allow", program, "--stop-grace", str(STOP_GRACE_S)],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env, cwd=tmp)
        wait_for(lambda: "exec service on" in self.output() or self.process.poll() is not None,
                 30, "the agent's start line")
        check(self.process.poll() is None, f"the agent exited:\n{self.output()}")
        ports = re.search(r"exec service on 127\.0\.0\.1:(\d+), HTTP on 127\.0\.0\.1:(\d+)",
                          self.output())
        check(ports is not None, f"no ports in the agent's start line:\n{self.output()}")
        self.exec_port, http_port = int(ports.group(1)), int(ports.group(2))
        check(0 < self.exec_port and self.exec_port != 29400 and 0 < http_port != 29401,
              f"--exec-port 0 / --http-port 0 should pick free ports, got {self.exec_port} and "
              f"{http_port}")
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=5) as reply:
            check(reply.status == 200, f"/healthz on the printed port answered {reply.status}")

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def exec_command(self, *words, **popen):
        return subprocess.Popen([self.ringd, "exec", "--port", str(self.exec_port), "127.0.0.1",
                                 *words], env=self.env, **popen)


def test(ringd, args):
    with tempfile.TemporaryDirectory(prefix="ringd-agent-pid1-") as tmp:
        program = os.path.join(tmp, "make_orphans.py")
        with open(program, "w") as f:
            f.write(SCRIPT.format(python=sys.executable))
        os.chmod(program, 0o755)
        agent = Agent(ringd, tmp, program)
        leftovers = []
        try:
            run_tests(agent, program, tmp, leftovers)
        finally:
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if agent.process.poll() is None:
                agent.process.kill()
                agent.process.wait(timeout=10)
            print(f"--- agent log ---\n{agent.output()[-3000:]}")


def run_tests(agent, program, tmp, leftovers):
    pid = agent.process.pid

    # 1. Orphans that end are reparented to the agent and reaped.
    out = os.path.join(tmp, "orphans")
    os.mkdir(out)
    result = agent.exec_command(program, "orphans", out, str(ORPHANS),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = result.communicate(timeout=60)[0].decode(errors="replace")
    check(result.returncode == 0, f"ringd exec ... orphans: exit {result.returncode}: {output}")
    for i in range(ORPHANS):
        text = wait_for(lambda: read(os.path.join(out, f"orphan-{i}")), 30, f"orphan {i}'s report")
        orphan, parent = map(int, text.split())
        leftovers.append(orphan)
        check(parent == pid, f"orphan {orphan} was reparented to pid {parent}, not to the agent "
                             f"(pid {pid}): the agent is not a child subreaper")
        wait_for(lambda: proc_stat(orphan) is None or proc_stat(orphan)[1] != pid, 15,
                 f"orphan {orphan} (a zombie child of the agent: {proc_stat(orphan)}) reaped")
        check(f"reaped orphaned process {orphan} (exit 0)" in agent.output(),
              f"the agent did not log reaping orphan {orphan}")
    check(not zombie_children(pid), f"zombie children of the agent: {zombie_children(pid)}")
    print(f"ok   {ORPHANS} orphans reparented to the agent and reaped, no zombie left")

    # 2. SIGTERM: to the exec command's group and to the orphan; SIGKILL after the grace.
    out = os.path.join(tmp, "stubborn")
    os.mkdir(out)
    caller = agent.exec_command(program, "stubborn", out, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        child = int(wait_for(lambda: read(os.path.join(out, "child-ready")), 30, "child-ready"))
        leftovers.append(child)
        text = wait_for(lambda: read(os.path.join(out, "orphan-ready")), 30, "orphan-ready")
        orphan, parent = map(int, text.split())
        leftovers.append(orphan)
        check(parent == pid, f"the session leader orphan {orphan} was reparented to pid {parent}, "
                             f"not to the agent (pid {pid})")
        started = time.monotonic()
        agent.process.send_signal(signal.SIGTERM)
        try:
            code = agent.process.wait(timeout=STOP_GRACE_S + 15)
        except subprocess.TimeoutExpired:
            raise harness.Failure(f"the agent still runs {STOP_GRACE_S + 15} s after SIGTERM")
        seconds = time.monotonic() - started
        check(code == 0, f"the agent exited {code} after SIGTERM")
        check(read(os.path.join(out, "child-term")) == "SIGTERM",
              "the exec command did not get SIGTERM")
        check(read(os.path.join(out, "orphan-term")) == "SIGTERM",
              "the orphan in its own session did not get SIGTERM")
        check(seconds >= STOP_GRACE_S - 0.5,
              f"the agent exited {seconds:.1f} s after SIGTERM, before the orphan's "
              f"{STOP_GRACE_S} s grace")
        # Killed by the agent: gone, or a zombie of whoever inherited it after the agent exited.
        wait_for(lambda: proc_stat(orphan) is None or proc_stat(orphan)[0] == "Z", 10,
                 f"the orphan {orphan} that ignored SIGTERM killed")
        log = agent.output()
        for line in ["signal 15: stopping", "SIGTERM to 1 orphaned process(es)",
                     "SIGTERM to the process groups of 1 exec command(s)",
                     f"SIGKILL to 1 orphaned process(es) still running after the grace (pids "
                     f"{orphan})", f"reaped orphaned process {orphan} (signal 9)", "stopped"]:
            check(line in log, f"the agent's log lacks '{line}'")
        caller.wait(timeout=10)
        print(f"ok   SIGTERM reached the exec command and the orphan; the orphan killed after "
              f"the {STOP_GRACE_S} s grace; the agent exited in {seconds:.1f} s")
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait(timeout=10)


if __name__ == "__main__":
    harness.main(test)
