#!/usr/bin/env python3
"""check_manpages — `controld --help` / `noded --help` and docs/man/{controld,noded}.8 list the
same flags (both ways), each man page shows the default --help prints, and groff renders the
pages without a warning (when groff is installed).

Usage: check_manpages.py BUILD_DIR [SOURCE_DIR]. Exit 0 when all agree, 1 otherwise."""

import os
import re
import shutil
import subprocess
import sys

# Flags that are modes or meta options: in the man page's MODES/OPTIONS, shown in --help's usage line.
META = {"help", "version", "check-config", "migrate", "export", "import", "config"}


def help_flags(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        sys.exit(f"{binary} --help exited {out.returncode}")
    flags = {}
    for line in text.splitlines():
        m = re.match(r"\s+--([a-z0-9-]+)(?: FILE)?\s{2,}(.*)$", line)
        if m:
            d = re.search(r"\[([^\]]*)\]\s*$", m.group(2))
            flags[m.group(1)] = d.group(1) if d else None
    usage = set(re.findall(r"--([a-z][a-z0-9-]+)", text))
    return flags, usage


def man_flags(page):
    """The flags a man page documents (.B/.BI/.TP item lines) -> the default it states."""
    flags = {}
    lines = open(page, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        if i == 0 or lines[i - 1] != ".TP":
            continue
        m = re.match(r'\.BI? \\-\\-([a-z0-9\\-]+)', line)
        if not m:
            continue
        name = m.group(1).replace("\\-", "-")
        default = None
        for nxt in lines[i + 1 : i + 6]:
            if nxt == ".TP" or nxt.startswith(".SH"):
                break
            d = re.match(r"Default: \\fB(.*)\\fR\.$", nxt)
            if d:
                default = d.group(1).replace("\\-", "-")
        flags[name] = default
    return flags


def main():
    build = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad = 0
    for prog in ("controld", "noded"):
        page = os.path.join(src, "docs", "man", prog + ".8")
        hflags, usage = help_flags(os.path.join(build, prog, prog))
        mflags = man_flags(page)
        for f, default in hflags.items():
            if f not in mflags:
                print(f"{page}: --{f} is in `{prog} --help` but not in the man page")
                bad += 1
            elif default is not None and mflags[f] != default:
                print(f"{page}: --{f}: the man page says default {mflags[f]!r}, --help {default!r}")
                bad += 1
        for f in mflags:
            if f not in hflags and not (f in META and f in usage):
                print(f"{page}: --{f} is in the man page but not in `{prog} --help`")
                bad += 1
        if shutil.which("groff"):
            r = subprocess.run(["groff", "-ww", "-man", "-Tutf8", page], capture_output=True,
                               text=True)
            if r.returncode != 0 or r.stderr.strip():
                print(f"{page}: groff -ww -man: {r.stderr.strip() or 'exit %d' % r.returncode}")
                bad += 1
        print(f"{prog}: {len(hflags)} flags in --help, {len(mflags)} in {os.path.basename(page)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
