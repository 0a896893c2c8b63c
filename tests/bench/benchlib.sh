# benchlib.sh — what the proxy benchmarks share, sourced by bench_proxy.sh, bench_edge.sh and
# bench_ramp.sh (POSIX sh): their scratch directory and processes, free ports, the head of an
# nginx config, the 1 KiB origin (nginx), the median and wrk's latency units.

# bench_tmp NAME: TMP, a fresh directory (mode 755: nginx workers read from it), removed at exit
# after every process listed in PIDS is stopped
bench_tmp() {
  TMP=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=""
  CGROUPS=""
  CPU_ENABLED=""
  trap bench_cleanup EXIT INT TERM
  chmod 755 "$TMP"
  mkdir -p "$TMP/origin/www"
  head -c 1024 /dev/zero | tr '\0' 'x' >"$TMP/origin/www/index.html"
}
bench_cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $PIDS; do wait "$p" 2>/dev/null || true; done
  for g in $CGROUPS; do rmdir "$g" 2>/dev/null || true; done
  # cgroup v2: the cpu controller is handed back off when cpu_cap turned it on
  [ -z "$CPU_ENABLED" ] || echo -cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  rm -rf "$TMP"
}

# cpu_cap NAME PERCENT PID...: move the processes (every thread of each) into a cgroup NAME of
# their own whose CPU time is capped at PERCENT of one core per 100 ms (the kernel's CFS
# bandwidth control: cgroup v1's cpu controller, else cgroup v2's cpu.max; root only); the
# group is removed at exit, and cgroup v2's cpu controller turned off again at the root when
# cpu_cap turned it on. Fails when neither is there or writable.
cpu_cap() {
  cap_name=$1; cap_pct=$2; shift 2
  if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    cap_g=/sys/fs/cgroup/cpu/$cap_name
    mkdir "$cap_g" || return 1
    CGROUPS="$CGROUPS $cap_g"
    echo 100000 >"$cap_g/cpu.cfs_period_us" && echo $((cap_pct * 1000)) >"$cap_g/cpu.cfs_quota_us" || return 1
  elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    if ! grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control; then
      echo +cpu >/sys/fs/cgroup/cgroup.subtree_control || return 1
      CPU_ENABLED=1
    fi
    cap_g=/sys/fs/cgroup/$cap_name
    mkdir "$cap_g" || return 1
    CGROUPS="$CGROUPS $cap_g"
    echo "$((cap_pct * 1000)) 100000" >"$cap_g/cpu.max" || return 1
  else
    echo "cpu_cap: no cgroup cpu controller here (/sys/fs/cgroup/cpu or cgroup v2 with cpu)" >&2
    return 1
  fi
  for cap_p in "$@"; do echo "$cap_p" >"$cap_g/cgroup.procs" || return 1; done
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
