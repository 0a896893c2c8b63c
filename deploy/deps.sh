#!/usr/bin/env bash
# Make sure the Debian packages cdnca builds and tests with are installed: installs them with
# apt-get when run as root and something is missing, else says what to install. Sourced or run
# by deploy/quickstart.sh and tests/run.sh. CDNCA_NO_INSTALL=1: only check.
set -euo pipefail
# python3-jsonschema: the integration tests check every answer against controld/openapi.json
pkgs=(build-essential cmake pkg-config python3 python3-jsonschema curl openssl ca-certificates
      libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev libcjson-dev libcmocka-dev libssl-dev libsystemd-dev
      libpq-dev postgresql  # libpq: controld on PostgreSQL; the server: the tests' own clusters
      nginx  # nginx: the reference proxy of the edge differential test
      haproxy  # haproxy: the load balancer of the cluster demo (deploy/cluster/demo.sh)
      jq)  # jq: the shell examples of README.md and docs/ take ids from earlier answers with it
have() {
  command -v cmake >/dev/null 2>&1 && command -v cc >/dev/null 2>&1 &&
    command -v python3 >/dev/null 2>&1 && python3 -c 'import jsonschema' >/dev/null 2>&1 &&
    command -v curl >/dev/null 2>&1 && command -v jq >/dev/null 2>&1 &&
    command -v pkg-config >/dev/null 2>&1 && [ -x /usr/sbin/nginx ] &&
    [ -x /usr/sbin/haproxy ] &&
    pkg-config --exists libmicrohttpd sqlite3 libcurl libcjson cmocka libcrypto libssl libsystemd libpq &&
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
if have; then exit 0; fi
if [ "${CDNCA_NO_INSTALL:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "cdnca: installing build dependencies: ${pkgs[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  have && exit 0
fi
echo "cdnca: missing build dependencies; install them with:" >&2
echo "  apt-get install -y ${pkgs[*]}" >&2
exit 1
