#!/usr/bin/env bash
# The controller on Kubernetes, against the test control plane (a real kube-apiserver; the fake kubelet is
# off, so Pods stay Pending as on a full cluster). Prints
#   - Pods created per minute by the controller for N online analyses: N analyses are submitted while the
#     controller admits one at a time, then it is restarted with room for all of them and creates the
#     backlog's Pods as fast as it can (timed from its process start to its N-1th Pod, by its own counter;
#     the start includes recovery: listing the N records and the Pods);
#   - the ceiling: the same number of Pods (same spec) created by a bare client, curl, PARALLEL at a time
#     (as PARALLEL curl processes, and as one `curl --parallel` reusing its connections; the faster counts);
#   - the ratio of the two;
#   - the controller's CPU (% of one core) and RSS while it tracks the N live Pods (CPU_SECONDS of steady
#     state: watch plus a full re-list every --resync-interval);
#   - watch-to-record latency p50/p99: a status write (phase Succeeded) on a Pod through the kube-apiserver
#     -> the analysis record seen as succeeded through the API server's HTTP API (SAMPLES Pods in turn).
# Usage: bench/kube_bench.sh [BUILD_DIR]
#   env: N=2000 PARALLEL=16 SAMPLES=200 CPU_SECONDS=30 KUBE_QPS=0 (the controller's --kube-qps; 0 = no
#   client-side limit; the deployed default is 20) KUBE_BURST=30 RESYNC=10 (--resync-interval)
#   A quick run: N=200 SAMPLES=50 CPU_SECONDS=10 bench/kube_bench.sh
#   PERF_DIR=DIR: sample the whole machine (perf record -a, cpu-clock) while the controller creates its
#   backlog's Pods and while `curl --parallel` creates the ceiling's, and print where the CPU went per
#   process for each (perf.controller.data, perf.curl.data and their reports are left in DIR).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
BIN=$BUILD/bin
N=${N:-2000}
PARALLEL=${PARALLEL:-16}
SAMPLES=${SAMPLES:-200}
CPU_SECONDS=${CPU_SECONDS:-30}
KUBE_QPS=${KUBE_QPS:-0}
KUBE_BURST=${KUBE_BURST:-30}
RESYNC=${RESYNC:-10}
HELPER="python3 $ROOT/bench/kube_bench.py"
CP="$ROOT/test/k8s/control-plane.sh"
for b in falcon-apiserver analyzer-controller; do
  [ -x "$BIN/$b" ] || { echo "missing $BIN/$b: build first (ninja -C $BUILD $b)" >&2; exit 1; }
done
((N >= 2)) || { echo "N must be at least 2" >&2; exit 1; }

WORK=$(mktemp -d /tmp/falcon-kubebench-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$CP" stop "$WORK/cp" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=bench/perf_lib.sh
source "$ROOT/bench/perf_lib.sh"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

FALCON_KUBELET=0 "$CP" start "$WORK/cp" >/dev/null
KUBECONFIG_FILE="$WORK/cp/kubeconfig"
kubectl() { "$ROOT/test/k8s/.bin/controlplane" kubectl --kubeconfig="$KUBECONFIG_FILE" "$@"; }
for ns in bench bench-curl; do
  kubectl create namespace "$ns" >/dev/null
  kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted >/dev/null
done

HTTP=$(port); AGRPC=$(port); CGRPC=$(port); CHTTP=$(port)
mkdir -p "$WORK/objects"
"$BIN/falcon-apiserver" --db="sqlite://$WORK/falcon.db" --http-listen=127.0.0.1:$HTTP \
  --grpc-listen=127.0.0.1:$AGRPC --controller-addr=127.0.0.1:$CGRPC --object-store="file://$WORK/objects" \
  --log-level=warn 2>"$WORK/apiserver.log" &
PIDS+=($!)
start_controller() {  # $1: online concurrency
  "$BIN/analyzer-controller" --api-server=127.0.0.1:$AGRPC --grpc-listen=127.0.0.1:$CGRPC \
    --http-listen=127.0.0.1:$CHTTP --runtime=kubernetes --kubeconfig="$KUBECONFIG_FILE" --namespace=bench \
    --analysis-image=falcon-analyzer:bench --object-store="file://$WORK/objects" --online-concurrency="$1" \
    --pod-start-timeout=86400 --resync-interval="$RESYNC" --kube-qps="$KUBE_QPS" --kube-burst="$KUBE_BURST" \
    --log-level=warn 2>>"$WORK/controller.log" &
  CTL=$!
  PIDS+=($CTL)
}
ready() {
  for _ in $(seq 300); do
    curl -sf "127.0.0.1:$CHTTP/readyz" >/dev/null && curl -sf "127.0.0.1:$HTTP/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "controller or API server not ready; logs in $WORK" >&2
  tail -20 "$WORK/controller.log" "$WORK/apiserver.log" >&2
  return 1
}

echo "kube bench: N=$N online analyses, controller --kube-qps=$KUBE_QPS --kube-burst=$KUBE_BURST" \
  "--resync-interval=$RESYNC, curl x$PARALLEL, $(nproc) cores, kube-apiserver 1.35 + embedded etcd"
start_controller 1
ready
$HELPER submit "$HTTP" "$N"
kill -9 "$CTL"; wait "$CTL" 2>/dev/null || true
# The backlog: one analysis has its Pod, N-1 wait. The restarted controller admits them all at once.
T_START=$(date +%s.%N)
perf_start controller
start_controller $((N + 1))
SECS=$($HELPER wait-created "$CHTTP" $((N - 1)) 1800 "$T_START")
perf_stop controller
PODS=$(kubectl get pods -n bench --no-headers 2>/dev/null | wc -l)
[ "$PODS" -eq "$N" ] || { echo "expected $N Pods in namespace bench, found $PODS" >&2; exit 1; }
CTL_RATE=$(python3 -c "print(f'{($N - 1) / $SECS * 60:.0f}')")
echo "controller: $((N - 1)) Pods in ${SECS} s = $CTL_RATE Pods/min"

echo "controller tracking $N live Pods for ${CPU_SECONDS} s: $($HELPER usage "$CTL" "$CPU_SECONDS")"
echo "watch-to-record latency (status write -> record): $($HELPER latency "$WORK/cp" bench "$HTTP" \
  "$WORK/objects" "$SAMPLES")"
kill "$CTL"; wait "$CTL" 2>/dev/null || true

# The ceiling: the same Pods (the controller's spec, new names) created by curl, PARALLEL at a time: once as
# PARALLEL curl processes (one TLS connection per Pod), once as one `curl --parallel` (connections reused,
# HTTP/2). The faster of the two is the ceiling.
TEMPLATE=$(kubectl get pods -n bench -o 'jsonpath={.items[0].metadata.name}')
M=$((N - 1))
$HELPER pod-files "$WORK/cp" bench "$TEMPLATE" "$WORK/podfiles" $M
# shellcheck disable=SC1091
source "$WORK/cp/env"
PKI="$WORK/cp/pki"
rate() { python3 -c "print(f'{$1 / ($3 - $2) * 60:.0f}')"; }
check_codes() {
  local ok
  ok=$(grep -c '^201$' "$1" || true)
  [ "$ok" -eq "$M" ] || { echo "curl created only $ok of $M Pods: $(sort "$1" | uniq -c | tr '\n' ' ')" >&2; exit 1; }
}
T0=$(date +%s.%N)
seq 0 $((M - 1)) | xargs -P "$PARALLEL" -I{} curl -s -o /dev/null -w '%{http_code}\n' --cacert "$PKI/ca.crt" \
  --cert "$PKI/admin.crt" --key "$PKI/admin.key" -H 'Content-Type: application/json' \
  --data-binary "@$WORK/podfiles/{}.json" "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/bench-curl/pods" \
  >"$WORK/curl.codes"
T1=$(date +%s.%N)
check_codes "$WORK/curl.codes"
XARGS_RATE=$(rate $M "$T0" "$T1")
echo "bare client, $PARALLEL curl processes: $M Pods in $(python3 -c "print(f'{$T1 - $T0:.2f}')") s = $XARGS_RATE Pods/min"
kubectl create namespace bench-curl2 >/dev/null
kubectl label namespace bench-curl2 pod-security.kubernetes.io/enforce=restricted >/dev/null
$HELPER curl-config "$WORK/cp" bench-curl2 "$WORK/podfiles" $M "$WORK/curl.cfg"
perf_start curl
T0=$(date +%s.%N)
curl -Z --parallel-max "$PARALLEL" -K "$WORK/curl.cfg" 2>/dev/null >"$WORK/curl2.codes" || true
T1=$(date +%s.%N)
perf_stop curl
check_codes "$WORK/curl2.codes"
PAR_RATE=$(rate $M "$T0" "$T1")
echo "bare client, one curl --parallel-max $PARALLEL: $M Pods in $(python3 -c "print(f'{$T1 - $T0:.2f}')") s = $PAR_RATE Pods/min"
# The same again with a watch on the namespace's Pods open meanwhile, as the controller's informer keeps
# one: what the kube-apiserver spends on delivering each new Pod to a watcher (not part of the ceiling).
kubectl create namespace bench-curl3 >/dev/null
kubectl label namespace bench-curl3 pod-security.kubernetes.io/enforce=restricted >/dev/null
$HELPER curl-config "$WORK/cp" bench-curl3 "$WORK/podfiles" $M "$WORK/curl3.cfg"
curl -sN --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
  "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/bench-curl3/pods?watch=1" >/dev/null 2>&1 &
WATCH=$!
PIDS+=($WATCH)
sleep 0.5
perf_start curl-watched
T0=$(date +%s.%N)
curl -Z --parallel-max "$PARALLEL" -K "$WORK/curl3.cfg" 2>/dev/null >"$WORK/curl3.codes" || true
T1=$(date +%s.%N)
perf_stop curl-watched
kill "$WATCH" 2>/dev/null || true
check_codes "$WORK/curl3.codes"
echo "bare client, one curl --parallel-max $PARALLEL with a watch open: $M Pods in" \
  "$(python3 -c "print(f'{$T1 - $T0:.2f}')") s = $(rate $M "$T0" "$T1") Pods/min"
CEILING=$((XARGS_RATE > PAR_RATE ? XARGS_RATE : PAR_RATE))
echo "ratio controller / bare-client ceiling ($CEILING Pods/min): $(python3 -c "print(f'{$CTL_RATE / $CEILING:.2f}')")"
