#!/usr/bin/env python3
"""perf_split — split the probing thread's CPU samples of a bench_probe profile by who spends
them: the kernel (by system call, and the share spent in the loopback receive path), libcurl,
libc, OpenSSL (CA loading, SSL_CTX, certificate decoding and verification, key exchange) and
common/probe.c.

    perf record --call-graph dwarf,16384 -F 2000 -o probe.data \\
        build/tests/bench_probe --sites 3000 --engines epoll
    perf script -i probe.data | python3 tests/bench/perf_split.py

Only samples whose stack holds probe_run count (the responder thread is left out). Debian's
libcurl has no symbols, so its own code is one line; OpenSSL's exported functions have names.
"""

import collections
import re
import sys

TLS_RULES = [
    (r"X509_STORE_load|X509_load_cert|PEM_X509_INFO_read|X509_LOOKUP_load|X509_LOOKUP_ctrl|"
     r"X509_STORE_set_default_paths", "tls: loading the CA file into a new store"),
    (r"X509_verify_cert", "tls: certificate chain verification (X509_verify_cert)"),
    (r"SSL_CTX_new|SSL_CTX_free", "tls: SSL_CTX_new/free per connection (libcurl)"),
    (r"EVP_PKEY_generate|EVP_PKEY_derive|ssl_derive|tls13_generate|tls13_derive|tls13_hkdf|HKDF",
     "tls: key exchange + key schedule"),
    (r"EVP_DigestVerify", "tls: CertificateVerify signature check"),
    (r"d2i_|OSSL_DECODER|X509_", "tls: certificate decoding (d2i, OSSL_DECODER)"),
]
RX = {"net_rx_action", "process_backlog", "__napi_poll"}


def classify(frames):
    frames = [f for f in frames if f[1] != "inlined"] or frames
    syms = [f[0] for f in frames]
    leaf = frames[0][1]
    s = " ".join(syms)
    for pat, name in TLS_RULES:
        if re.search(pat, s):
            return name
    kernel = "kernel" in leaf
    if not kernel and re.search(r"SSL_|ossl_statem|tls_|ssl3_|ssl_", s):
        return "tls: other handshake and records (user)"
    if kernel:
        calls = [x for x in syms if x.startswith("__x64_sys_") or x.startswith("__sys_")]
        return "kernel: " + (re.sub(r"^__(x64_)?sys_", "", calls[-1]) if calls
                             else "other (page faults, interrupts)")
    if leaf.endswith("libc.so.6"):
        return "libc (malloc/free, strings)"
    if "libcurl" in leaf:
        return "libcurl (its own code)"
    if "bench_probe" in leaf:
        return "ours (common/probe.c)"
    if "vdso" in leaf:
        return "vdso clock_gettime"
    return "other: " + leaf.split("/")[-1]


def main():
    cats = collections.Counter()
    total = rx = 0
    frames = []

    def flush():
        nonlocal total, rx
        if frames and any(f[0] == "probe_run" for f in frames):
            total += 1
            cats[classify(frames)] += 1
            if any(f[0] in RX for f in frames):
                rx += 1

    for line in sys.stdin:
        if not line.strip():
            flush()
            frames = []
            continue
        m = re.match(r"\s+[0-9a-f]+\s+(\S+)\s+\((.*)\)", line)
        if m:
            frames.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
    flush()
    if total == 0:
        print("no samples under probe_run (record with --call-graph dwarf)")
        return 1
    kernel = sum(n for c, n in cats.items() if c.startswith("kernel"))
    print("probing thread: %d samples; kernel %.1f%% (loopback receive path %.1f%%)"
          % (total, 100.0 * kernel / total, 100.0 * rx / total))
    for c, n in cats.most_common():
        print("%5.1f%%  %s" % (100.0 * n / total, c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
