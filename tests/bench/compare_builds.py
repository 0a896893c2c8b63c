#!/usr/bin/env python3
"""compare_builds — one benchmark of two builds side by side: runs interleaved (old, new, old,
new, ...), the median of every column per build, and new/old ratios of the medians (> 1: the
new build takes longer). For a refactor that must stay within noise of the code before it.

    python3 tests/bench/compare_builds.py OLD_BUILD NEW_BUILD [--rounds 5] [--sites 10000]

Runs bench_store (SQLite; its config set, site list and the store phases of two probe rounds,
milliseconds) and bench_rounds (two probe rounds of 1,000 to --sites sites against loopback
origins, seconds) from each build's tests/ directory. Bounded: rounds x 2 builds x 2 programs."""
import argparse
import os
import re
import statistics
import subprocess


def bench_store(build, sites):
    out = subprocess.run([os.path.join(build, "tests", "bench_store"), "--sites", str(sites),
                          "--runs", "1"], capture_output=True, text=True, timeout=600,
                         check=True).stdout
    head = [l for l in out.splitlines() if l.startswith("| driver")][0]
    row = [l for l in out.splitlines() if l.startswith("| SQLite | 1 ")][0]
    names = [c.strip() for c in head.strip("|").split("|")][2:]
    vals = [float(c) for c in row.strip("|").split("|")[2:]]
    return dict(zip(names, vals))


def bench_rounds(build, sites):
    out = subprocess.run([os.path.join(build, "tests", "bench_rounds"), str(sites), "60"],
                         capture_output=True, text=True, timeout=900, check=True).stdout
    lines = [l for l in out.splitlines() if l.startswith("|")]
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    got = {}
    for l in lines[2:]:
        row = dict(zip(names, [c.strip() for c in l.strip("|").split("|")]))
        if row.get("sites") != str(sites):
            continue
        for col in ("wall s", "load s", "store s", "process CPU s"):
            got["rounds: round %s %s" % (row["round"], col)] = float(row[col])
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sites", type=int, default=10000)
    a = ap.parse_args()
    runs = {"old": [], "new": []}
    for _ in range(a.rounds):
        for which, build in (("old", a.old), ("new", a.new)):
            r = bench_store(build, a.sites)
            r.update(bench_rounds(build, a.sites))
            runs[which].append(r)
    cols = [c for c in runs["old"][0] if all(c in r for r in runs["old"] + runs["new"])]
    print("| measure | old median | new median | new/old |")
    print("|---|---:|---:|---:|")
    for c in cols:
        o = statistics.median(r[c] for r in runs["old"])
        n = statistics.median(r[c] for r in runs["new"])
        print("| %s | %.3g | %.3g | %.2f |" % (c, o, n, n / o if o else float("nan")))


if __name__ == "__main__":
    main()
