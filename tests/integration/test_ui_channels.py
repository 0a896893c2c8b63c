#!/usr/bin/env python3
"""test_ui_channels — the dashboard's channels page in Debian's chromium (ui/channels_test.mjs)
against a real controld and a fake Slack receiver on loopback: an admin creates a Slack channel
(its URL never shown again), sends a test and sees it delivered; a short routing key is refused
with the field named; a channel is deleted after a confirmation; a read token sees no page.
The harness checks the receiver got exactly the one Slack message of the test.
Skips (exit 77, reported as skipped by ctest) when chromium, node or ui/node_modules is missing.
"""

import json
import os
import shutil
import subprocess
import sys

import harness
from harness import Controld
from receiver import Receiver

HERE = os.path.dirname(os.path.abspath(__file__))
UI_DIR = os.path.join(HERE, "ui")
ARTIFACTS = os.path.normpath(os.path.join(HERE, "..", "artifacts"))
CHROMIUM = os.environ.get("CDNCA_CHROMIUM", "/usr/bin/chromium")
SKIP_RC = 77
UI_TIMEOUT_S = 240


def test_channels_page(tmp):
    rx = Receiver().start()
    c = Controld(tmp, extra_args=["--webhook-retry-ms", "50"]).start()
    try:
        st, tok, _ = c.api("POST", "/v1/tokens", {"name": "viewer", "role": "read"})
        assert st == 201, tok
        info = os.path.join(tmp, "channels.json")
        slack_url = rx.url + "/services/T000/B000/uitoken0123456789"
        with open(info, "w") as f:
            json.dump({"slack_url": slack_url, "read": tok["token"]}, f)
        env = dict(os.environ, CDNCA_URL=c.url, CDNCA_ADMIN_TOKEN=c.admin_token,
                   CDNCA_CHANNELS=info, CDNCA_ARTIFACTS=ARTIFACTS, CDNCA_CHROMIUM=CHROMIUM)
        r = subprocess.run([shutil.which("node"), os.path.join(UI_DIR, "channels_test.mjs")],
                           cwd=UI_DIR, env=env, stdin=subprocess.DEVNULL, timeout=UI_TIMEOUT_S)
        assert r.returncode == 0, "channels_test.mjs failed (exit %d)" % r.returncode
        with open(info) as f:
            assert json.load(f)["channel_id"] >= 1
        got = [x for x in rx.snapshot() if x.path == "/services/T000/B000/uitoken0123456789"]
        assert len(got) == 1, got
        msg = got[0].json()
        assert "text" in msg and msg["blocks"], msg
        st, body, _ = c.api("GET", "/v1/channels")
        assert st == 200 and body["channels"] == [], body
    finally:
        rx.stop()


def main():
    if not os.access(CHROMIUM, os.X_OK):
        print("SKIP: no chromium at %s (apt-get install -y chromium)" % CHROMIUM)
        sys.exit(SKIP_RC)
    if shutil.which("node") is None:
        print("SKIP: node is not installed")
        sys.exit(SKIP_RC)
    if not os.path.isdir(os.path.join(UI_DIR, "node_modules", "playwright-core")):
        print("SKIP: tests/integration/ui/node_modules is missing "
              "(cd tests/integration/ui && npm install)")
        sys.exit(SKIP_RC)
    harness.main([test_channels_page])


if __name__ == "__main__":
    main()
