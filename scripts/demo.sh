#!/usr/bin/env bash
# The main job, end to end on the embedded defaults (SQLite, local-process Pods, a local directory as the
# object store): builds, starts falcon-apiserver and analyzer-controller on free loopback ports, registers a
# demo experiment with sample artifacts, waits for the offline analyses the controller starts by itself,
# runs an online analysis with a user script (--wait --follow), lists and downloads its results, shows a
# cancel, and prints where everything is.
#
#   scripts/demo.sh            run the demo, then stop the services (the demo dir is kept)
#   KEEP=1 scripts/demo.sh     leave the services running afterwards
#   DEMO_DIR=DIR scripts/demo.sh   use DIR instead of a new temp dir
#   FALCON_PREBUILT=DIR scripts/demo.sh   use the binaries in DIR/bin, DIR/plugins and the catalog
#                              DIR/etc (an installed or copied build); nothing is installed or built, so
#                              any user can run it
set -euo pipefail
if [ -n "${FALCON_PREBUILT:-}" ]; then
  FALCON_PREBUILT=$(cd "$FALCON_PREBUILT" && pwd) || { echo "demo: FALCON_PREBUILT: no folder $FALCON_PREBUILT" >&2; exit 1; }
fi
cd "$(dirname "$0")/.."
ROOT=$PWD

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

if [ -n "${FALCON_PREBUILT:-}" ]; then
  say "using the binaries in $FALCON_PREBUILT (FALCON_PREBUILT: nothing installed or built)"
  BIN=$FALCON_PREBUILT/bin
  for b in falcon-apiserver analyzer-controller falcon-runner falcon-localpod falcon; do
    [ -x "$BIN/$b" ] || { echo "demo: $BIN/$b is missing or not executable (FALCON_PREBUILT=$FALCON_PREBUILT)" >&2; exit 1; }
  done
else
  say "installing dependencies (idempotent) and building"
  bash scripts/setup.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build -j"$(nproc)" falcon-apiserver analyzer-controller falcon-runner falcon-localpod falcon \
    file-stats hlo-stats xplane-stats trace-summary >/dev/null
  BIN=$ROOT/build/bin
fi
export PATH=$BIN:$PATH

D=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/falcon-demo.XXXXXX")}
mkdir -p "$D"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP=$(free_port); GRPC=$(free_port); CTRL=$(free_port); CTRL_HTTP=$(free_port)
# FALCON_OBJECT_STORE=gs://BUCKET (with STORAGE_EMULATOR_HOST or Google credentials, see docs/gcs.md) keeps
# everything in GCS instead; the bucket is created when missing.
STORE=${FALCON_OBJECT_STORE:-file://$D/store}
BUCKET_FLAG=()
case "$STORE" in gs://*) BUCKET_FLAG=(--create-bucket) ;; esac

PIDS=()
cleanup() {
  if [ "${KEEP:-0}" = 1 ]; then
    echo "services left running (pids ${PIDS[*]}); stop them with: kill ${PIDS[*]}"
    return
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_ready() {  # URL NAME LOG
  for _ in $(seq 1 100); do
    if curl -fsS "$1" >/dev/null 2>&1; then echo "$2 is ready ($1)"; return 0; fi
    sleep 0.2
  done
  echo "$2 did not become ready; its log is $3:" >&2
  tail -20 "$3" >&2
  exit 1
}

# Access control is on (--auth=on): the first start writes a local admin token for the CLI
# (${XDG_STATE_HOME:-~/.local/state}/falcon/admin.token, used automatically for a server on this machine)
# and the controller's token next to the database (docs/security.md "Local defaults").
say "starting falcon-apiserver (SQLite at $D/falcon.db, access control on)"
"$BIN/falcon-apiserver" --db="sqlite://$D/falcon.db" --http-listen="127.0.0.1:$HTTP" \
  --grpc-listen="127.0.0.1:$GRPC" --controller-addr="127.0.0.1:$CTRL" --object-store="$STORE" "${BUCKET_FLAG[@]}" \
  --auth=on >"$D/apiserver.log" 2>&1 &
PIDS+=($!)
wait_ready "http://127.0.0.1:$HTTP/readyz" falcon-apiserver "$D/apiserver.log"
say "starting analyzer-controller (local Pods in $D/state, authenticated with $D/controller.token)"
"$BIN/analyzer-controller" --api-server="127.0.0.1:$GRPC" --grpc-listen="127.0.0.1:$CTRL" \
  --http-listen="127.0.0.1:$CTRL_HTTP" --runtime=local --state-dir="$D/state" --object-store="$STORE" \
  "${BUCKET_FLAG[@]}" --poll-interval=2 --api-token-file="$D/controller.token" >"$D/controller.log" 2>&1 &
PIDS+=($!)
wait_ready "http://127.0.0.1:$CTRL_HTTP/readyz" analyzer-controller "$D/controller.log"
export FALCON_SERVER=http://127.0.0.1:$HTTP

say "who the CLI is (the local admin token, found by itself)"
run falcon whoami
printf '$ curl %s/v1/analyses   # no credential\n' "$FALCON_SERVER"
curl -sS "$FALCON_SERVER/v1/analyses"; echo

say "the plugin catalog"
run falcon plugin list

# The artifacts are uploads (--file): they land under <object store>/exps/, which the servers always allow.
# Registering files by URI instead (--uri file:///...) needs --allowed-input-root on both servers.
say "registering experiment demo-exp with sample artifacts"
mkdir -p "$D/samples"
python3 scripts/make_demo_samples.py "$D/samples"
run falcon exp create --id demo-exp --name "demo: matmul profile"
for f in "$D"/samples/*; do
  case "$f" in
    *.hlo|*.txt) type=hlo ;;
    *.xplane.pb) type=xplane ;;
    *.trace.json|*.trace.json.gz) type=trace ;;
    *) type=file ;;
  esac
  run falcon exp add-artifact demo-exp --type "$type" --file "$f"
done
run falcon exp complete demo-exp

say "waiting for the offline analyses the controller starts by itself (it polls every 2 s)"
n_art=$(ls "$D/samples" | wc -l)
for i in $(seq 1 300); do
  out=$(falcon analysis list --exp-id demo-exp -o json)
  read -r total done_ failed <<<"$(python3 -c '
import json,sys
a=json.load(sys.stdin); a=a.get("analyses",a) if isinstance(a,dict) else a
t=[x for x in a if x.get("analysis_type")=="offline"]
print(len(t), sum(x["status"] in ("succeeded","failed","cancelled") for x in t), sum(x["status"]=="failed" for x in t))' <<<"$out")"
  line="$(printf '  offline analyses: %s of %s artifacts created, %s finished, %s failed' "$total" "$n_art" "$done_" "$failed")"
  if [ -t 1 ]; then
    printf '\r%s' "$line"                                   # one line updated in place on a terminal
  elif [ "$line" != "${last_line:-}" ]; then
    echo "$line"                                            # plain lines, only when something changed
  fi
  last_line="$line"
  if [ "$total" -ge "$n_art" ] && [ "$done_" -ge "$total" ]; then [ -t 1 ] && echo; break; fi
  if [ "$i" -eq 300 ]; then
    echo; echo "demo: the offline analyses did not finish in 300 s; the controller's log is $D/controller.log" >&2
    exit 1
  fi
  sleep 1
done
run falcon analysis list --exp-id demo-exp
if [ "$failed" -gt 0 ]; then
  echo "demo: $failed offline analyses failed (their error_message above; \`falcon analysis logs ID\` shows a log;" \
       "the controller's log is $D/controller.log)" >&2
  exit 1
fi

say "an online analysis with a user script (--wait --follow)"
cat >"$D/count_ops.py" <<'PY'
# A user's analysis: counts the lines of every staged artifact and writes one JSONL record each.
import json, os, pathlib
inp = pathlib.Path(os.environ["FALCON_INPUT_DIR"])
out = pathlib.Path(os.environ["FALCON_OUTPUT_DIR"]) / "line-counts.jsonl"
with out.open("w") as f:
    for p in sorted(inp.rglob("*")):
        if p.is_file():
            n = sum(1 for _ in p.open("rb"))
            print(f"{p.relative_to(inp)}: {n} lines")
            f.write(json.dumps({"path": str(p.relative_to(inp)), "lines": n}) + "\n")
print("done")
PY
run falcon analysis create --exp-id demo-exp --name line-counts --script "$D/count_ops.py" \
  --command "python3 count_ops.py" --wait --follow
ONLINE=$(falcon analysis list --exp-id demo-exp -o json | python3 -c '
import json,sys
a=json.load(sys.stdin); a=a.get("analyses",a) if isinstance(a,dict) else a
print([x for x in a if x.get("name")=="line-counts"][0]["analysis_id"])')

say "its results, listed and downloaded"
run falcon analysis results "$ONLINE"
run falcon analysis results "$ONLINE" --download "$D/results/$ONLINE"
ls -l "$D/results/$ONLINE"

say "a cancel: a long analysis, cancelled while it runs"
LONG=$(falcon analysis create --exp-id demo-exp --name long-sleep --command "echo started; sleep 600" | tail -1)
echo "created $LONG"
sleep 3
run falcon analysis cancel "$LONG"
run falcon analysis get "$LONG"

say "where things are"
cat <<TXT
  API server:        $FALCON_SERVER   (log: $D/apiserver.log)
  controller:        http://127.0.0.1:$CTRL_HTTP/metrics   (log: $D/controller.log)
  database:          $D/falcon.db
  credentials:       ${XDG_STATE_HOME:-$HOME/.local/state}/falcon/admin.token (admin, the CLI's), $D/controller.token
  object store:      $STORE   (results and output.log under analysis/demo-exp/<analysis-id>/)
  local Pods:        $D/state   (falcon-localpod --state-dir=$D/state list)
  downloaded:        $D/results/$ONLINE
TXT
