#!/usr/bin/env python3
"""certs — throwaway TLS test PKI made with the openssl command line (Python 3 stdlib only).

Keys live only in the directory the caller gives (a temp dir); nothing is ever committed.

    from certs import make_test_pki
    pki = make_test_pki(tmpdir, ["origin.test"])   # {"ca": ..., "ca_key": ..., "cert": ..., "key": ...}

Command line (prints the same dict as JSON):

    python3 certs.py --dir D --host origin.test [--host more.test] [--ip 127.0.0.1]
                     [--stem server] [--ca-cert CA --ca-key KEY]
"""

import argparse
import json
import os
import secrets
import subprocess
import sys

CURVE = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(args, cwd):
    r = subprocess.run(["openssl"] + args, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace")))


def make_ca(directory, stem="ca", cn="cdnca test CA"):
    """Make a self-signed CA in directory; returns (cert_path, key_path)."""
    cert = os.path.join(directory, stem + ".pem")
    key = os.path.join(directory, stem + ".key")
    _openssl(["req", "-x509"] + CURVE + ["-keyout", key, "-out", cert, "-days", "3",
              "-subj", "/CN=" + cn,
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign"], directory)
    os.chmod(key, 0o600)
    return cert, key


def make_cert(directory, ca_cert, ca_key, hostnames, ips=(), stem="server"):
    """Make a server cert for hostnames (DNS SANs) and ips (IP SANs) signed by the CA.

    Returns (cert_path, key_path); the cert file holds the leaf only."""
    if not hostnames and not ips:
        raise ValueError("need at least one hostname or IP")
    cert = os.path.join(directory, stem + ".pem")
    key = os.path.join(directory, stem + ".key")
    csr = os.path.join(directory, stem + ".csr")
    ext = os.path.join(directory, stem + ".ext")
    sans = ["DNS:" + h for h in hostnames] + ["IP:" + ip for ip in ips]
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % ",".join(sans))
        f.write("basicConstraints=critical,CA:FALSE\n")
        f.write("keyUsage=critical,digitalSignature,keyEncipherment\n")
        f.write("extendedKeyUsage=serverAuth\n")
    cn = hostnames[0] if hostnames else ips[0]
    _openssl(["req", "-new"] + CURVE + ["-keyout", key, "-out", csr, "-subj", "/CN=" + cn],
             directory)
    os.chmod(key, 0o600)
    _openssl(["x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key,
              "-set_serial", str(secrets.randbits(63)), "-days", "3", "-sha256",
              "-extfile", ext, "-out", cert], directory)
    os.unlink(csr)
    os.unlink(ext)
    return cert, key


def make_test_pki(directory, hostnames, ips=("127.0.0.1",), stem="server", ca=None):
    """A CA (made, or ca=(cert, key) reused) and a server cert for hostnames + ips.

    Returns {"ca", "ca_key", "cert", "key"} (paths inside directory)."""
    os.makedirs(directory, exist_ok=True)
    ca_cert, ca_key = ca if ca else make_ca(directory)
    cert, key = make_cert(directory, ca_cert, ca_key, list(hostnames), list(ips), stem)
    return {"ca": ca_cert, "ca_key": ca_key, "cert": cert, "key": key}


def main(argv=None):
    ap = argparse.ArgumentParser(description="make a throwaway TLS test CA and server cert")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--host", action="append", default=[])
    ap.add_argument("--ip", action="append", default=[])
    ap.add_argument("--stem", default="server")
    ap.add_argument("--ca-cert")
    ap.add_argument("--ca-key")
    a = ap.parse_args(argv)
    if bool(a.ca_cert) != bool(a.ca_key):
        ap.error("--ca-cert and --ca-key go together")
    ca = (a.ca_cert, a.ca_key) if a.ca_cert else None
    pki = make_test_pki(a.dir, a.host, a.ip, a.stem, ca)
    print(json.dumps(pki))
    return 0


if __name__ == "__main__":
    sys.exit(main())
