#!/usr/bin/env bash
# Benchmark of falcon-apiserver on SQLite with 100k analysis records. Prints figures; not a timed test.
#   - HTTP GET /v1/analyses/{id} (random ids) with wrk, and GET /_hello, a hello-world route of the same
#     HTTP stack (cpp-httplib thread pool, routing, metrics), in the same run as the ceiling;
#   - gRPC GetAnalysisRecord throughput and p50/p99 from a C++ client (apiserver_bench grpc), and the
#     standard gRPC health service's Check on the same server as its ceiling (a no-op method);
#   - the server's peak RSS.
# Usage: bench/apiserver_bench.sh [BUILD_DIR]   (default: build). Env: RECORDS (100000), DURATION (10),
#        CONNECTIONS (16), WRK_THREADS (2), GRPC_THREADS (8), HTTP_THREADS (16).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
records="${RECORDS:-100000}"
duration="${DURATION:-10}"
connections="${CONNECTIONS:-16}"
wrk_threads="${WRK_THREADS:-2}"
grpc_threads="${GRPC_THREADS:-8}"
http_threads="${HTTP_THREADS:-16}"

server="$build/bin/falcon-apiserver"
helper="$build/bin/apiserver_bench"
for f in "$server" "$helper"; do
  [ -x "$f" ] || { echo "missing $f: build the targets falcon-apiserver and apiserver_bench" >&2; exit 1; }
done
command -v wrk >/dev/null || { echo "wrk is not installed (scripts/setup.sh installs it)" >&2; exit 1; }

work="$(mktemp -d -t falcon-apiserver-bench-XXXXXX)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "== loading $records records into SQLite"
"$helper" load --db="sqlite://$work/falcon.db" --records="$records" --ids-out="$work/ids.txt"

http_port="$(free_port)"
grpc_port="$(free_port)"
"$server" --db="sqlite://$work/falcon.db" --http-listen="127.0.0.1:$http_port" \
  --grpc-listen="127.0.0.1:$grpc_port" --controller-addr=127.0.0.1:1 --log-level=warn \
  --http-threads="$http_threads" 2>"$work/server.log" &
pid=$!
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$http_port/readyz" >/dev/null || { cat "$work/server.log"; exit 1; }

cat >"$work/random_id.lua" <<LUA
local ids = {}
for line in io.lines("$work/ids.txt") do ids[#ids + 1] = line end
math.randomseed(42)
request = function()
  return wrk.format("GET", "/v1/analyses/" .. ids[math.random(#ids)])
end
LUA

# Prints "<label>: N req/s, p50 X, p99 Y, non-2xx Z" from wrk's --latency output.
run_wrk() {
  local label="$1"; shift
  local out
  out="$(wrk -t"$wrk_threads" -c"$connections" -d"${duration}s" --latency "$@")"
  echo "$out" >"$work/wrk-${label//[^A-Za-z0-9]/_}.txt"
  local rps p50 p99 bad
  rps="$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
  p50="$(awk '$1=="50%" {print $2}' <<<"$out")"
  p99="$(awk '$1=="99%" {print $2}' <<<"$out")"
  bad="$(awk '/Non-2xx/ {print $5}' <<<"$out")"
  printf '%-28s %10s req/s   p50 %-9s p99 %-9s non-2xx %s\n' "$label" "$rps" "$p50" "$p99" "${bad:-0}"
}

echo "== HTTP (wrk -t$wrk_threads -c$connections -d${duration}s, server --http-threads=$http_threads)"
run_wrk "GET /_hello (ceiling)" "http://127.0.0.1:$http_port/_hello"
run_wrk "GET /v1/analyses/{id}" -s "$work/random_id.lua" "http://127.0.0.1:$http_port"

echo "== gRPC (C++ client, $grpc_threads threads, ${duration}s)"
"$helper" grpc --method=health --addr="127.0.0.1:$grpc_port" --threads="$grpc_threads" --seconds="$duration"
"$helper" grpc --addr="127.0.0.1:$grpc_port" --ids="$work/ids.txt" --threads="$grpc_threads" \
  --seconds="$duration"
echo "server peak RSS: $(awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status") MiB"

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
