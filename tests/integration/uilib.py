"""uilib — what the browser tests share: where the playwright-core scripts (ui/*.mjs) and the
screenshots (tests/artifacts/) live, Debian's chromium, the skip (exit 77, reported as skipped by
ctest, never as passed) when chromium, node or ui/node_modules is missing, and one run of a
script against a controld.

    import uilib
    rc = uilib.run_script("channels_test.mjs", c.url, c.admin_token, CDNCA_CHANNELS=info)
    ...
    if __name__ == "__main__":
        uilib.main([test_channels_page])   # skips, or harness.main(tests)
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
UI_DIR = os.path.join(HERE, "ui")
ARTIFACTS = os.path.normpath(os.path.join(HERE, "..", "artifacts"))
CHROMIUM = os.environ.get("CDNCA_CHROMIUM", "/usr/bin/chromium")
SKIP_RC = 77
UI_TIMEOUT_S = 240


def missing():
    """Why the browser tests cannot run here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return "no chromium at %s (apt-get install -y chromium)" % CHROMIUM
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isdir(os.path.join(UI_DIR, "node_modules", "playwright-core")):
        return ("tests/integration/ui/node_modules is missing "
                "(cd tests/integration/ui && npm install)")
    return None


def require():
    """Exit 77 with a SKIP line when the browser tests cannot run here."""
    why = missing()
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP_RC)


def run_script(script, url, admin_token, timeout=UI_TIMEOUT_S, **env):
    """Run ui/<script> with node against the controld at url; env adds CDNCA_* variables.
    Returns its exit code (subprocess.TimeoutExpired past timeout)."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    full = dict(os.environ, CDNCA_URL=url, CDNCA_ADMIN_TOKEN=admin_token,
                CDNCA_ARTIFACTS=ARTIFACTS, CDNCA_CHROMIUM=CHROMIUM, **env)
    return subprocess.run([shutil.which("node"), os.path.join(UI_DIR, script)], cwd=UI_DIR,
                          env=full, stdin=subprocess.DEVNULL, timeout=timeout).returncode


def check_script(script, c, **env):
    """run_script against the harness's Controld c; an exit other than 0 fails the test."""
    rc = run_script(script, c.url, c.admin_token, **env)
    assert rc == 0, "%s failed (exit %d)" % (script, rc)


def main(tests):
    """The browser tests' entry point: skip, or run tests under the harness."""
    require()
    import harness  # noqa: PLC0415 - only once the tests can run
    harness.main(tests)
