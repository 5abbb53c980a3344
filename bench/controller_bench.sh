#!/usr/bin/env bash
# Controller throughput on the embedded defaults: submits N online analyses with a trivial command through
# the API server's HTTP API with the online limit at C, waits for all to finish, and prints
#   - end-to-end analyses per minute,
#   - create -> RUNNING p50/p99 (record created_at -> its Pod's created_at in the runtime's status.json;
#     the controller marks RUNNING right after creating the Pod),
#   - Pod exit -> terminal record p50/p99 (status.json finished_at -> the record's final updated_at),
#   - the controller's CPU seconds and peak RSS,
#   - the ceiling: the same number of local Pods started C at a time without the controller.
# Usage: bench/controller_bench.sh [BUILD_DIR] (env: N=2000 C=32 COMMAND=true; PERF_DIR=DIR samples the
#   whole machine while the controller runs the analyses and while the bare Pods run: bench/perf_lib.sh)
set -euo pipefail
BUILD=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}
BIN=$BUILD/bin
N=${N:-2000}
C=${C:-32}
COMMAND=${COMMAND:-true}
for b in falcon-apiserver analyzer-controller falcon-localpod falcon-runner; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: build first (ninja -C $BUILD)" >&2; exit 1; }
done
BARE=$(find "$BUILD" -name controller_bench_pods -type f -perm -u+x | head -1)
WORK=$(mktemp -d /tmp/falcon-ctlbench-XXXXXX)
chmod 777 "$WORK"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=bench/perf_lib.sh
source "$(dirname "$0")/perf_lib.sh"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP=$(port); AGRPC=$(port); CGRPC=$(port); CHTTP=$(port)
mkdir -p "$WORK/objects" "$WORK/state"
"$BIN/falcon-apiserver" --db="sqlite://$WORK/falcon.db" --http-listen=127.0.0.1:$HTTP \
  --grpc-listen=127.0.0.1:$AGRPC --controller-addr=127.0.0.1:$CGRPC --object-store="file://$WORK/objects" \
  --log-level=warn 2>"$WORK/apiserver.log" &
PIDS+=($!)
"$BIN/analyzer-controller" --api-server=127.0.0.1:$AGRPC --grpc-listen=127.0.0.1:$CGRPC \
  --http-listen=127.0.0.1:$CHTTP --runtime=local --state-dir="$WORK/state" --object-store="file://$WORK/objects" \
  --online-concurrency=$C --finished-pod-retention=-1 --log-level=warn 2>"$WORK/controller.log" &
CTL=$!
PIDS+=($CTL)
for i in $(seq 100); do
  curl -sf "127.0.0.1:$CHTTP/readyz" >/dev/null && curl -sf "127.0.0.1:$HTTP/readyz" >/dev/null && break
  sleep 0.2
done
echo "controller bench: N=$N online analyses of '$COMMAND', online limit $C, $(nproc) cores"
perf_start controller
python3 - "$HTTP" "$N" "$COMMAND" "$WORK" "$CTL" <<'PY'
import json, sys, time, urllib.error, urllib.request, os, concurrent.futures as cf
from datetime import datetime
http, n, command, work, ctl = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
base = f"http://127.0.0.1:{http}"
def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        sys.exit(f"{method} {path}: {e.code} {e.read().decode(errors='replace')[:500]}")
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
call("POST", "/v1/exps", {"exp_id": "bench", "name": "bench", "status": "completed"})
t0 = time.time()
with cf.ThreadPoolExecutor(8) as ex:
    ids = list(ex.map(lambda i: call("POST", "/v1/analyses", {"exp_id": "bench", "analysis_type": "online", "command": command})["analysis_id"], range(n)))
t_submitted = time.time()
while True:
    recs, tok = [], ""
    while True:
        page = call("GET", "/v1/analyses?exp_id=bench&page_size=1000" + (f"&page_token={tok}" if tok else ""))
        recs += page["analyses"]; tok = page.get("next_page_token", "")
        if not tok: break
    done = [r for r in recs if r["status"] in ("succeeded", "failed", "cancelled")]
    if len(done) >= n: break
    time.sleep(0.5)
t_done = time.time()
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
to_running, to_terminal, failed = [], [], 0
for r in recs:
    failed += r["status"] != "succeeded"
    st = json.load(open(os.path.join(work, "state", "pods", "falcon-analysis-" + r["analysis_id"], "status.json")))
    to_running.append(ts(st["created_at"]) - ts(r["created_at"]))
    if st.get("finished_at"):
        to_terminal.append(ts(r["updated_at"]) - ts(st["finished_at"]))
first = min(ts(r["created_at"]) for r in recs)
last = max(ts(r["updated_at"]) for r in recs)
with open(f"/proc/{ctl}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
rss = [l for l in open(f"/proc/{ctl}/status") if l.startswith("VmHWM")][0].split()[1]
print(f"submitted {n} in {t_submitted - t0:.1f} s; all terminal after {t_done - t0:.1f} s; not succeeded: {failed}")
print(f"end-to-end: {n / (last - first) * 60:.0f} analyses/minute (first create -> last terminal {last - first:.1f} s)")
print(f"create -> RUNNING: p50 {pct(to_running, 50):.3f} s, p99 {pct(to_running, 99):.3f} s")
print(f"pod exit -> terminal record: p50 {pct(to_terminal, 50):.3f} s, p99 {pct(to_terminal, 99):.3f} s")
print(f"controller: {cpu:.1f} CPU seconds, peak RSS {int(rss) / 1024:.1f} MiB")
PY
perf_stop controller
kill $CTL; wait $CTL 2>/dev/null || true
if [ -n "$BARE" ]; then
  mkdir -p "$WORK/bare-state"
  perf_start bare
  echo -n "ceiling (local Pods without the controller): "
  "$BARE" --state-dir="$WORK/bare-state" --object-store="file://$WORK/objects" --bin-dir="$BIN" -n "$N" -c "$C" \
    --command="$COMMAND"
  perf_stop bare
else
  echo "ceiling: controller_bench_pods not built (ninja -C $BUILD controller_bench_pods)"
fi
