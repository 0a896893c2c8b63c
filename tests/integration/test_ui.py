#!/usr/bin/env python3
"""test_ui — the dashboard in a real browser: controld + two test origins + ui/ui_test.mjs.

Starts controld ($CDNCA_BUILD/controld/controld) on a free loopback port with a fresh database
and fast probe rounds, two test origins (origin.py), then runs the playwright-core script with
Debian's chromium. Prints SKIP and exits 77 (ctest: skipped) when chromium, node or
ui/node_modules is missing; tests/run.sh installs them (tests/deps.sh).
Screenshots go to tests/artifacts/.
"""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import uilib

START_TIMEOUT_S = 20
UI_TIMEOUT_S = 220


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_portfile(path, proc, what):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("%s exited early with %s" % (what, proc.returncode))
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError("%s did not write its port file within %d s" % (what, START_TIMEOUT_S))


def wait_healthz(url, proc, log_path):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            with open(log_path, errors="replace") as f:
                raise RuntimeError("controld exited with %s:\n%s" % (proc.returncode, f.read()[-4000:]))
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError("controld did not answer /healthz within %d s" % START_TIMEOUT_S)


def stop(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def main():
    uilib.require()
    build = os.environ.get("CDNCA_BUILD")
    if not build:
        print("FAIL: CDNCA_BUILD is not set")
        return 1
    controld = os.path.join(build, "controld", "controld")
    if not os.access(controld, os.X_OK):
        print("FAIL: no controld binary at %s" % controld)
        return 1

    tmp = tempfile.mkdtemp(prefix="cdnca-ui-")
    procs = []
    logs = []
    rc = 1
    try:
        ports = []
        for name in ("ui-o1", "ui-o2"):
            pf = os.path.join(tmp, name + ".port")
            log = open(os.path.join(tmp, name + ".log"), "w")
            logs.append(log)
            p = subprocess.Popen([sys.executable, os.path.join(uilib.HERE, "origin.py"), "--port", "0",
                                  "--portfile", pf, "--name", name],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            procs.append(p)
            ports.append(wait_portfile(pf, p, "origin " + name))

        token = "adm-" + secrets.token_hex(16)
        port = free_port()
        url = "http://127.0.0.1:%d" % port
        clog_path = os.path.join(tmp, "controld.log")
        clog = open(clog_path, "w")
        logs.append(clog)
        env = dict(os.environ, CDNCA_ADMIN_TOKEN=token)
        if os.environ.get("CDNCA_TEST_DB") == "pg":  # the PostgreSQL pass (pgfixture.py)
            import pgfixture
            db = pgfixture.new_database()
        else:
            db = os.path.join(tmp, "c.db")
        cd = subprocess.Popen([controld, "--listen", "127.0.0.1:%d" % port,
                               "--db", db, "--probe-interval-ms", "500"],
                              env=env, stdin=subprocess.DEVNULL, stdout=clog, stderr=subprocess.STDOUT)
        procs.append(cd)
        wait_healthz(url, cd, clog_path)

        try:
            rc = uilib.run_script("ui_test.mjs", url, token, timeout=UI_TIMEOUT_S,
                                  CDNCA_ORIGIN1="127.0.0.1:%d" % ports[0],
                                  CDNCA_ORIGIN2="127.0.0.1:%d" % ports[1])
        except subprocess.TimeoutExpired:
            print("FAIL: ui_test.mjs did not finish within %d s" % UI_TIMEOUT_S)
            rc = 1
        if rc != 0:
            with open(clog_path, errors="replace") as f:
                print("--- controld log (tail) ---\n" + f.read()[-4000:])
    except RuntimeError as e:
        print("FAIL: %s" % e)
        rc = 1
    finally:
        for p in reversed(procs):
            stop(p)
        for f in logs:
            f.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_ui: %s" % ("PASS" if rc == 0 else "FAIL"))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
