#!/usr/bin/env python3
"""test_ui_enrolkeys — the dashboard's enrolment keys page in Debian's chromium
(ui/enrolkeys_test.mjs) against a real controld and a real noded: an admin creates a key in the
browser and its secret is shown once (with the noded env line and command line); a noded started
with that key as CDNCA_ENROL_KEY enrols and writes its token file; the list then shows one use;
the admin revokes the key after a confirmation (dismissed once, then accepted) and it is listed
as revoked; read and operator tokens have no nav entry and no create form.
The browser runs twice (before and after the noded starts), the harness handing over the key.
Skips (exit 77, reported as skipped by ctest) when chromium, node or ui/node_modules is missing.
"""

import json
import os
import stat

import uilib
from harness import Controld, Noded, wait_until

WAIT = 30


def token(c, name, role):
    st, body, _ = c.api("POST", "/v1/tokens", {"name": name, "role": role})
    assert st == 201, (st, body)
    return body["token"]


def keys(c):
    st, body, _ = c.api("GET", "/v1/enrolment-keys")
    assert st == 200, (st, body)
    return body["enrolment_keys"]


def browse(c, info, phase):
    rc = uilib.run_script("enrolkeys_test.mjs", c.url, c.admin_token, CDNCA_ENROLKEYS=info,
                          CDNCA_ENROLKEYS_PHASE=phase)
    assert rc == 0, "enrolkeys_test.mjs (%s) failed (exit %d)" % (phase, rc)
    with open(info) as f:
        return json.load(f)


def test_enrolment_keys_page(tmp):
    c = Controld(tmp, extra_args=["--node-online-ms", "5000"]).start()
    info = os.path.join(tmp, "enrolkeys.json")
    with open(info, "w") as f:
        json.dump({"operator": token(c, "oncall", "operator"), "read": token(c, "viewer", "read")}, f)

    # 1. the admin makes a key in the browser; the test writes back its id and secret
    got = browse(c, info, "create")
    kid, secret = got["key_id"], got["key"]
    [k] = [k for k in keys(c) if k["id"] == kid]
    assert k["name"] == "fra-rollout" and k["max_uses"] == 5 and k["uses"] == 0, k
    assert k["state"] == "active" and k["expires_at"], k
    assert all("key" not in x for x in keys(c))

    # 2. a real noded enrols with it
    n = Noded(c, None, tmp, name="edge-ui-1", env={"CDNCA_ENROL_KEY": secret},
              extra_args=["--heartbeat-interval-ms", "500"]).start()
    token_path = os.path.join(n.state_dir, "node-token")
    assert stat.S_IMODE(os.stat(token_path).st_mode) == 0o600
    with open(token_path) as f:
        assert f.read().strip()

    def online():
        st, body, _ = c.api("GET", "/v1/nodes")
        assert st == 200, body
        return [x for x in body["nodes"] if x["name"] == "edge-ui-1" and x["online"]]
    wait_until(online, timeout=WAIT, what="the enrolled node online")
    assert [k["uses"] for k in keys(c) if k["id"] == kid] == [1]

    # 3. the list shows the use; revoke; other roles see no form
    browse(c, info, "after")
    [k] = [k for k in keys(c) if k["id"] == kid]
    assert k["state"] == "revoked" and k["revoked_at"] and k["uses"] == 1, k
    st, err, _ = c.api("POST", "/v1/node/enrol", {"key": secret, "name": "edge-ui-2"}, token=None)
    assert st == 401 and err["error"]["code"] == "enrolment_key_invalid", (st, err)
    # the node enrolled before keeps working on its own token
    wait_until(online, timeout=WAIT, what="the node still online after the revocation")
    n.stop()


if __name__ == "__main__":
    uilib.main([test_enrolment_keys_page])
