#!/usr/bin/env python3
"""test_doc_examples — every shell example of README.md and docs/*.md marked as runnable
(a fenced block opened with ```sh runnable) works against a running demo.

It starts deploy/quickstart.sh (controld on SQLite, one noded, the two demo origins and the
demo site) with its state in a temporary directory and every port on a free loopback port, then
runs the runnable blocks of each file in order, in one bash per file (so a block may use the ids
an earlier block of the same file kept), with `set -euo pipefail` and curl made to fail on an
HTTP error (--fail-with-body). The examples talk to controld through these variables, which the
test sets and whose assignments in the blocks it skips:
  CDNCA    controld's base URL          TOKEN    an admin token
  NODE     noded's visitor URL          PRIMARY  the demo's primary origin (POST /__ctl breaks it)
Under ctest CDNCA_BUILD names the build being tested."""

import os
import re
import signal
import subprocess

import urllib.request

import harness
from harness import Controld, free_port, wait_until

TOP = os.path.abspath(os.path.join(harness.HERE, "..", ".."))
SCRIPT = os.path.join(TOP, "deploy", "quickstart.sh")
VARS = ("CDNCA", "TOKEN", "NODE", "PRIMARY")
START_TIMEOUT = 240.0
BLOCK_TIMEOUT = 180


def runnable_blocks(path):
    """The runnable shell blocks of one Markdown file, in order, without the lines that assign
    the variables the test sets."""
    blocks, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if cur is None:
                if re.match(r"^```sh runnable\s*$", line):
                    cur = (n, [])
                continue
            if line.startswith("```"):
                blocks.append(cur)
                cur = None
                continue
            if re.match(r"^(%s)=" % "|".join(VARS), line):
                continue
            cur[1].append(line)
    assert cur is None, "%s: a runnable block is not closed" % path
    return blocks


def doc_files():
    out = [os.path.join(TOP, "README.md")]
    d = os.path.join(TOP, "docs")
    out += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".md"))
    return out


PRELUDE = """set -euo pipefail
curl() { command curl --fail-with-body "$@"; }
"""


def test_runnable_examples(tmp):
    """Each file's runnable blocks, in order, exit 0 against the demo."""
    files = [(f, runnable_blocks(f)) for f in doc_files()]
    files = [(f, b) for f, b in files if b]
    assert files, "no runnable examples found"
    demo = os.path.join(tmp, "demo")
    ports = {k: free_port() for k in ("API", "NODE", "NODE_ADMIN", "ORIGIN1", "ORIGIN2")}
    env = dict(os.environ)
    env["CDNCA_DEMO_DIR"] = demo
    for k, p in ports.items():
        env["CDNCA_DEMO_%s_PORT" % k] = str(p)
    out_path = os.path.join(tmp, "quickstart.out")
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(["bash", SCRIPT], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=tmp,
                                start_new_session=True)

    def output():
        with open(out_path) as f:
            return f.read()

    try:
        def ready():
            if proc.poll() is not None:
                raise harness.StopWaiting("quickstart exited %s:\n%s" % (proc.returncode, output()))
            return "Ctrl-C stops everything." in output()
        wait_until(ready, timeout=START_TIMEOUT, what="the demo", interval=0.2)
        with open(os.path.join(demo, "admin-token")) as f:
            token = f.read().strip()
        run_env = dict(os.environ)
        run_env.update(CDNCA="http://127.0.0.1:%d" % ports["API"], TOKEN=token,
                       NODE="http://127.0.0.1:%d" % ports["NODE"],
                       PRIMARY="http://127.0.0.1:%d" % ports["ORIGIN1"])
        for path, blocks in files:
            script = PRELUDE
            for line, body in blocks:
                script += "echo '== %s:%d' >&2\n" % (os.path.relpath(path, TOP), line)
                script += "".join(body)
            r = subprocess.run(["bash", "-c", script], cwd=tmp, env=run_env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=BLOCK_TIMEOUT)
            assert r.returncode == 0, "%s: the examples failed (exit %d)\n%s\n%s" % (
                os.path.relpath(path, TOP), r.returncode, r.stdout.decode()[-3000:],
                r.stderr.decode()[-3000:])
            print("%s: %d runnable blocks passed" % (os.path.relpath(path, TOP), len(blocks)))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers, r.read().decode()


def test_api_reference_page(tmp):
    """GET /docs/api serves the readable API reference: compiled in, no token, the dashboard's
    Content-Security-Policy (nothing from outside controld), its script among the dashboard's
    files; the dashboard links to it."""
    c = Controld(tmp).start()
    status, headers, page = get(c.url + "/docs/api")
    assert status == 200 and headers["Content-Type"].startswith("text/html"), (status, headers)
    _, ui_headers, index = get(c.url + "/ui/")
    csp = headers["Content-Security-Policy"]
    assert csp == ui_headers["Content-Security-Policy"] and "default-src 'self'" in csp, csp
    assert headers["X-Content-Type-Options"] == "nosniff", headers
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert scripts == ["/ui/apidoc.js"], scripts
    assert not re.search(r'(src|href)="(https?:)?//', page), "the page loads something from outside"
    status, headers, js = get(c.url + "/ui/apidoc.js")
    assert status == 200 and "javascript" in headers["Content-Type"], (status, headers)
    assert '"/v1/openapi.json"' in js and "innerHTML" not in js
    assert 'href="/docs/api"' in index, "the dashboard does not link to the API reference"
    c.stop()


if __name__ == "__main__":
    harness.main()
