#!/usr/bin/env python3
"""smtpserver — a local SMTP server for integration tests: Debian's python3-aiosmtpd run as
`python3 -m aiosmtpd` with its Mailbox handler, so every message lands in a maildir.

    s = SmtpServer(tmpdir).start()   # 127.0.0.1, port chosen free; s.port
    s.messages()                     # [email.message.EmailMessage], in arrival order
    s.stop()

It offers no STARTTLS. aiosmtpd is a required test dependency (tests/deps.sh): when neither this
interpreter nor /usr/bin/python3 has it, start() fails, it does not skip.
"""

import email
import email.policy
import os
import subprocess

import harness
from harness import wait_until, free_port


def _interpreter():
    import sys
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", "import aiosmtpd"], capture_output=True).returncode == 0:
            return py
    raise AssertionError("python3-aiosmtpd is not installed (tests/deps.sh installs it)")


class SmtpServer:
    def __init__(self, tmpdir, name="smtp"):
        self.dir = os.path.join(tmpdir, name + "-maildir")
        self.log_path = os.path.join(tmpdir, name + ".log")
        self.port = free_port()
        self.proc = None

    def start(self):
        py = _interpreter()
        log = open(self.log_path, "ab")
        self.proc = harness.popen_tied(
            [py, "-m", "aiosmtpd", "-n", "-l", "127.0.0.1:%d" % self.port,
             "-c", "aiosmtpd.handlers.Mailbox", self.dir],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

        def up():
            import socket
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    return s.recv(100).startswith(b"220")
            except OSError:
                return False
        wait_until(up, timeout=20, what="the SMTP server on port %d" % self.port)
        return self

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def messages(self):
        """Every message received, oldest first."""
        new = os.path.join(self.dir, "new")
        if not os.path.isdir(new):
            return []
        files = sorted((os.path.getmtime(os.path.join(new, f)), f) for f in os.listdir(new))
        out = []
        for _, f in files:
            with open(os.path.join(new, f), "rb") as fh:
                out.append(email.message_from_bytes(fh.read(), policy=email.policy.default))
        return out
