# benchlib.sh — what the proxy benchmarks share, sourced by bench_proxy.sh, bench_edge.sh and
# bench_ramp.sh (POSIX sh): their scratch directory and processes, free ports, the head of an
# nginx config, the 1 KiB origin (nginx), the median and wrk's latency units.

# bench_tmp NAME: TMP, a fresh directory (mode 755: nginx workers read from it), removed at exit
# after every process listed in PIDS is stopped
bench_tmp() {
  TMP=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=""
  trap bench_cleanup EXIT INT TERM
  chmod 755 "$TMP"
  mkdir -p "$TMP/origin/www"
  head -c 1024 /dev/zero | tr '\0' 'x' >"$TMP/origin/www/index.html"
}
bench_cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $PIDS; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}

freeport() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# nginx_head DIR WORKERS: the start of an nginx.conf whose files live in DIR (pid, error log,
# temporary files): WORKERS workers in the foreground, 4096 connections each, no access log,
# keep-alive without end; the http block is left open for the caller's servers
nginx_head() {
  cat <<CONF
worker_processes $2;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $1; proxy_temp_path $1;
  fastcgi_temp_path $1; uwsgi_temp_path $1; scgi_temp_path $1;
  keepalive_requests 1000000;
CONF
}

# origin_conf PORT[=LEVEL]...: $TMP/origin/nginx.conf, one nginx worker serving $TMP/origin/www on
# each loopback port (keep-alive without end, no access log); =LEVEL adds "X-Level: LEVEL"
origin_conf() {
  {
    nginx_head "$TMP/origin" 1
    for spec in "$@"; do
      port=${spec%%=*}
      hdr=""
      [ "$port" = "$spec" ] || hdr="add_header X-Level ${spec#*=}; "
      echo "  server { listen 127.0.0.1:$port; root $TMP/origin/www; ${hdr}location / { } }"
    done
    echo "}"
  } >"$TMP/origin/nginx.conf"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# wrk prints p99 as e.g. "99%  1.23ms"; normalise to microseconds.
to_us() {
  awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); print v} else if (v ~ /ms$/) {sub(/ms$/,"",v); print v*1000}
        else if (v ~ /s$/) {sub(/s$/,"",v); print v*1000000} else print v}'
}
