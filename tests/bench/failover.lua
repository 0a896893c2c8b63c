-- failover.lua — wrk script for bench_failover.sh: counts responses per status class across
-- every wrk thread and prints them, with wrk's socket errors, in one machine-readable line.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  c2, c3, c4, c5, c502, c503, c504 = 0, 0, 0, 0, 0, 0, 0
end

function response(status, headers, body)
  if status < 300 then
    c2 = c2 + 1
  elseif status < 400 then
    c3 = c3 + 1
  elseif status < 500 then
    c4 = c4 + 1
  else
    c5 = c5 + 1
    if status == 502 then c502 = c502 + 1 end
    if status == 503 then c503 = c503 + 1 end
    if status == 504 then c504 = c504 + 1 end
  end
end

function done(summary, latency, requests)
  local t = {c2 = 0, c3 = 0, c4 = 0, c5 = 0, c502 = 0, c503 = 0, c504 = 0}
  for _, th in ipairs(threads) do
    for k, _ in pairs(t) do
      t[k] = t[k] + (th:get(k) or 0)
    end
  end
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d rps=%.0f p50_us=%d p99_us=%d max_us=%d " ..
    "s2xx=%d s3xx=%d s4xx=%d s5xx=%d s502=%d s503=%d s504=%d " ..
    "err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), latency.max,
    t.c2, t.c3, t.c4, t.c5, t.c502, t.c503, t.c504,
    e.connect, e.read, e.write, e.status, e.timeout))
end
