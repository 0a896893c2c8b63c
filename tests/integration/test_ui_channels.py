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

import uilib
from harness import Controld
from receiver import Receiver



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
        uilib.check_script("channels_test.mjs", c, CDNCA_CHANNELS=info)
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


if __name__ == "__main__":
    uilib.main([test_channels_page])
