#!/usr/bin/env python3
"""test_quickstart — the README's first command, deploy/quickstart.sh, end to end.

It runs the script with its state in a temporary directory and every port on a free loopback
port (CDNCA_DEMO_DIR, CDNCA_DEMO_*_PORT), waits for its "Try:" text, then runs the curl
commands it printed, as printed: a request through the node is served by "primary"; breaking
the primary moves the site to level 2 and requests to "backup"; repairing it fails back
(failback auto). Last, SIGTERM to the script (as a service manager or `kill` would send) must
stop every process it started. With one of its ports taken, it stops before starting anything
and names the port.

Run by hand, the script builds into the repository's ./build first (as the README says); under
ctest CDNCA_BUILD names the build being tested, and the script uses its binaries as they are."""

import json
import os
import re
import signal
import socket
import subprocess

import harness
from harness import free_port, wait_until

TOP = os.path.abspath(os.path.join(harness.HERE, "..", ".."))
SCRIPT = os.path.join(TOP, "deploy", "quickstart.sh")
START_TIMEOUT = 240.0  # includes the script's own cmake build
WAIT = 60.0  # rounds are 2 s apart in the demo: 3 failed rounds plus propagation


def descendants(pid):
    """Every live process below pid (children first found through /proc/*/stat)."""
    parent_of = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces or parentheses
        rest = stat[stat.rindex(")") + 2:].split()
        parent_of[int(d)] = int(rest[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for child, ppid in parent_of.items():
            if ppid == p and child not in out:
                out.append(child)
                todo.append(child)
    return out


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def port_open(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_printed(cmd):
    """Run one printed command line with bash, as a user would paste it; returns its stdout."""
    r = subprocess.run(["bash", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    assert r.returncode == 0, (cmd, r.returncode, r.stderr)
    return r.stdout.decode()


def as_json(text):
    return json.loads(text)


def test_quickstart_demo_then_sigterm_stops_everything(tmp):
    """README: deploy/quickstart.sh runs controld, one noded and two demo origins with a demo
    site of two levels and prints what to try; each printed step does what it says; SIGTERM
    stops every process it started."""
    demo = os.path.join(tmp, "demo")
    ports = {k: free_port() for k in ("API", "NODE", "NODE_ADMIN", "ORIGIN1", "ORIGIN2")}
    env = dict(os.environ)
    env["CDNCA_DEMO_DIR"] = demo
    for k, p in ports.items():
        env["CDNCA_DEMO_%s_PORT" % k] = str(p)
    out_path, err_path = os.path.join(tmp, "quickstart.out"), os.path.join(tmp, "quickstart.err")
    out, err = open(out_path, "wb"), open(err_path, "wb")
    proc = subprocess.Popen(["bash", SCRIPT], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            env=env, cwd=tmp, start_new_session=True)
    out.close()
    err.close()
    kids = []

    def output():
        with open(out_path) as f:
            return f.read()

    def fail(msg):
        with open(err_path) as f:
            e = f.read()
        logs = ""
        for name in ("controld.log", "noded.log"):
            try:
                with open(os.path.join(demo, name)) as f:
                    logs += "\n---- %s ----\n%s" % (name, "".join(f.readlines()[-30:]))
            except OSError:
                pass
        raise AssertionError("%s\n---- stdout ----\n%s\n---- stderr ----\n%s%s"
                             % (msg, output()[-3000:], e[-3000:], logs))

    try:
        def printed():
            if proc.poll() is not None:
                raise harness.StopWaiting("exited %s" % proc.returncode)
            return "Ctrl-C stops everything." in output()
        try:
            wait_until(printed, timeout=START_TIMEOUT, what="the Try: text", interval=0.2)
        except (AssertionError, harness.StopWaiting) as e:
            fail("quickstart did not get to its Try: text: %s" % e)
        text = output()
        assert "Try:" in text, text
        kids = descendants(proc.pid)
        for k in ("API", "NODE", "ORIGIN1", "ORIGIN2"):
            assert ":%d" % ports[k] in text, (k, text)  # it shows the ports it was given
        m = re.search(r"admin token in (\S+)", text)
        assert m and m.group(1).startswith(demo), text
        try_part = text[text.index("Try:"):]
        cmds = [ln.strip() for ln in try_part.splitlines() if ln.strip().startswith("curl ")]
        assert len(cmds) == 5, cmds
        visit, brk, status, repair, messages = cmds
        assert "503" in brk and "200" in repair and "/status" in status, cmds
        assert "/messages" in messages, cmds

        # served by "primary" (once the node has the demo site)
        def origin_now():
            return as_json(run_printed(visit)).get("origin")
        wait_until(lambda: origin_now() == "primary", timeout=WAIT,
                   what='"primary" through the node')
        wait_until(lambda: as_json(run_printed(status))["levels"][0]["health"] == "healthy",
                   timeout=WAIT, what="level 1 healthy")

        # break the primary: after 3 failed rounds current_level is 2; requests go to "backup"
        assert as_json(run_printed(brk))["status"] == 503
        wait_until(lambda: as_json(run_printed(status))["current_level"] == 2, timeout=WAIT,
                   what="current_level 2")
        wait_until(lambda: origin_now() == "backup", timeout=WAIT, what='"backup" through the node')

        # repair: automatic failback
        assert as_json(run_printed(repair))["status"] == 200
        wait_until(lambda: as_json(run_printed(status))["current_level"] == 1, timeout=WAIT,
                   what="current_level 1 again")
        wait_until(lambda: origin_now() == "primary", timeout=WAIT,
                   what='"primary" through the node again')
        evs = as_json(run_printed(messages))["events"]
        sw = [(e["data"]["to_level"], e["data"]["reason"]) for e in evs
              if e["type"] == "level.switched"]
        assert sw == [(2, "auto_failover"), (1, "auto_failback")], sw

        # SIGTERM to the script: it stops everything it started
        kids = descendants(proc.pid)
        assert len(kids) >= 4, kids  # two origins, controld, noded
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fail("quickstart did not exit within 30 s of SIGTERM")
        if proc.returncode != 128 + signal.SIGTERM:
            fail("quickstart exited %s after SIGTERM, expected %d"
                 % (proc.returncode, 128 + signal.SIGTERM))
        with open(err_path) as f:
            assert "a process exited" not in f.read(), "SIGTERM reported as a crash"
        try:
            wait_until(lambda: not [k for k in kids if alive(k)], timeout=20,
                       what="every child of quickstart gone")
        except AssertionError as e:
            fail("%s: still running %s" % (e, [k for k in kids if alive(k)]))
        still = [p for p in ports.values() if port_open(p)]
        assert still == [], "ports still served after SIGTERM: %s" % still
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        for k in kids:
            if alive(k):
                try:
                    os.kill(k, signal.SIGKILL)
                except OSError:
                    pass


def test_quickstart_names_a_taken_port_and_starts_nothing(tmp):
    """deploy/quickstart.sh checks its ports before it starts anything: with one of them held by
    another program it exits 1 at once, naming that port and the variable that moves it (no
    Python traceback), and leaves no process and no state behind."""
    demo = os.path.join(tmp, "demo")
    ports = {k: free_port() for k in ("API", "NODE", "NODE_ADMIN", "ORIGIN1", "ORIGIN2")}
    env = dict(os.environ)
    env["CDNCA_DEMO_DIR"] = demo
    for k, p in ports.items():
        env["CDNCA_DEMO_%s_PORT" % k] = str(p)
    for held in ("API", "ORIGIN2"):
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", ports[held]))
            squatter.listen(1)
            r = subprocess.run(["bash", SCRIPT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, cwd=tmp, timeout=30, text=True)
        assert r.returncode == 1, (held, r)
        assert "port %d" % ports[held] in r.stderr, (held, r.stderr)
        assert "CDNCA_DEMO_%s_PORT" % held in r.stderr, (held, r.stderr)
        others = [k for k in ports if k != held]
        for k in others:
            assert "port %d" % ports[k] not in r.stderr, (held, k, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        assert not os.path.exists(demo), "state created although a port was taken"
        still = [ports[k] for k in others if port_open(ports[k])]
        assert still == [], "something was started on %s" % still


if __name__ == "__main__":
    harness.main()
