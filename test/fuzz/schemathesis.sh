#!/usr/bin/env bash
# The HTTP API against an independent fuzzer: Schemathesis, from PyPI, generates requests from
# src/api/openapi.yaml (valid and invalid ones, single calls and chains that follow the document's links)
# and checks every answer against the document: no 5xx, status codes, content types, headers and bodies as
# documented, invalid input refused with 4xx, valid input accepted, 405 for methods a route does not serve.
#
#   schemathesis.sh install            create the cached venv with the pinned Schemathesis; idempotent
#   schemathesis.sh validate           check that the document is valid OpenAPI 3 and loads in Schemathesis
#   schemathesis.sh run [BUILD_DIR]    start falcon-apiserver + analyzer-controller from BUILD_DIR/bin on
#                                      loopback (SQLite, local Pods, a local object store, all in
#                                      BUILD_DIR/fuzz-run), seed an Exp and analyses, fuzz, fail on any
#                                      failure. Exit 77 (ctest: skipped) when the binaries are not built.
#
# Knobs: FUZZ_MAX_TIME (seconds, default 300: the fuzzing and stateful rounds repeat until it is spent; 0:
# one round each), FUZZ_MIN_CASES (the run fails when it sent fewer test cases, default 20000 with a time
# budget, 0 for one round), FUZZ_MAX_EXAMPLES (cases per operation and fuzzing round, default 250),
# FUZZ_STATEFUL_EXAMPLES (call chains per stateful round, default 250), FUZZ_SEED (default 20; "random"
# for a new one each run), FUZZ_WORKERS (threads per fuzzer process, default 1: more hit a CPython 3.11
# ast race inside Hypothesis, and the GIL leaves nothing to gain), FUZZ_EXTRA_ARGS (more
# `schemathesis run` flags, e.g. --continue-on-failure), FUZZ_VENV (the venv's folder).
# Generating and checking cases is CPU-bound (about 17 ms of CPU per case), so the case count follows the
# CPU the two fuzzer processes get: the summary prints both, and the load average.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DOC="$ROOT/src/api/openapi.yaml"
SCHEMATHESIS_VERSION=4.32.5
REQUIREMENTS="$HERE/requirements.txt"  # every package pinned, schemathesis==$SCHEMATHESIS_VERSION among them
# Outside the build dir, keyed by the pins, so a fresh clone or build dir reuses it and a new pin makes a new
# venv.
KEY=$(sha256sum "$REQUIREMENTS" | cut -c1-12)
VENV="${FUZZ_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/falcon/schemathesis-$SCHEMATHESIS_VERSION-$KEY}"

venv_ok() {
  [ -x "$VENV/bin/schemathesis" ] && [ -x "$VENV/bin/openapi-spec-validator" ] &&
    [ "$("$VENV/bin/schemathesis" --version 2>/dev/null)" = "schemathesis, version $SCHEMATHESIS_VERSION" ]
}

install() {
  if venv_ok; then
    echo "schemathesis $SCHEMATHESIS_VERSION already installed in $VENV"
    return 0
  fi
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQUIREMENTS"
  if ! venv_ok; then
    echo "schemathesis.sh: the install into $VENV did not give schemathesis $SCHEMATHESIS_VERSION" >&2
    exit 1
  fi
  echo "installed schemathesis $SCHEMATHESIS_VERSION into $VENV"
}

ensure_venv() {
  venv_ok && return 0
  echo "schemathesis.sh: no venv at $VENV; installing it (scripts/setup.sh does this beforehand)"
  install
}

validate() {
  ensure_venv
  "$VENV/bin/openapi-spec-validator" "$DOC"
  "$VENV/bin/python" "$HERE/check_document.py" "$DOC"
}

free_port() {
  python3 "${HERE}/../support/free_port.py"  # below the ephemeral range (see there)
}

wait_ready() {  # URL NAME LOG PID
  for _ in $(seq 1 150); do
    if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
    if ! kill -0 "$4" 2>/dev/null; then break; fi
    sleep 0.2
  done
  echo "schemathesis.sh: $2 did not become ready at $1; the end of its log ($3):" >&2
  tail -30 "$3" >&2
  exit 1
}

# curl that fails the run, showing the answer, unless the status is the expected one.
expect() {  # STATUS curl-args...
  local want=$1 out code
  shift
  out=$(curl -sS -w '\n%{http_code}' "$@")
  code=${out##*$'\n'}
  if [ "$code" != "$want" ]; then
    echo "schemathesis.sh: seeding: curl $* answered $code, expected $want: ${out%$'\n'*}" >&2
    exit 1
  fi
  printf '%s' "${out%$'\n'*}"
}

run() {
  local build="${1:-$ROOT/build}"
  build="$(cd "$build" && pwd)"
  local bin="$build/bin" b
  for b in bin/falcon-apiserver bin/analyzer-controller bin/falcon-runner bin/falcon-localpod \
           plugins/file-stats; do
    if [ ! -x "$build/$b" ]; then
      echo "SKIPPED: $build/$b is not built; build falcon-apiserver analyzer-controller falcon-runner" \
           "falcon-localpod and the plugins first"
      exit 77
    fi
  done
  ensure_venv

  local examples="${FUZZ_MAX_EXAMPLES:-250}" stateful_examples="${FUZZ_STATEFUL_EXAMPLES:-250}"
  local seed="${FUZZ_SEED:-20}" workers="${FUZZ_WORKERS:-1}" max_time="${FUZZ_MAX_TIME:-300}" min_cases
  if [ -n "${FUZZ_MIN_CASES:-}" ]; then min_cases=$FUZZ_MIN_CASES
  elif [ "$max_time" != 0 ]; then min_cases=20000
  else min_cases=0
  fi
  if [ "$seed" = random ]; then seed=$(python3 -c 'import random; print(random.randrange(1, 2**31))'); fi

  local D="$build/fuzz-run"
  rm -rf "$D"
  mkdir -p "$D/state" "$D/objects" "$D/tmp"
  local HTTP GRPC CTRL CTRL_HTTP
  HTTP=$(free_port); GRPC=$(free_port); CTRL=$(free_port); CTRL_HTTP=$(free_port)
  local base="http://127.0.0.1:$HTTP"

  PIDS=()
  trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
  TMPDIR="$D/tmp" "$bin/falcon-apiserver" --db="sqlite://$D/falcon.db" --http-listen="127.0.0.1:$HTTP" \
    --grpc-listen="127.0.0.1:$GRPC" --controller-addr="127.0.0.1:$CTRL" --object-store="file://$D/objects" \
    --controller-retry-seconds=5 >"$D/apiserver.log" 2>&1 &
  PIDS+=($!)
  # Commands the fuzzer makes up run in local Pods (in bubblewrap where it works: read-only root, no
  # network), at most two at a time and for 5 s at most.
  "$bin/analyzer-controller" --api-server="127.0.0.1:$GRPC" --grpc-listen="127.0.0.1:$CTRL" \
    --http-listen="127.0.0.1:$CTRL_HTTP" --runtime=local --state-dir="$D/state" \
    --object-store="file://$D/objects" --poll-interval=2 --online-concurrency=2 --offline-concurrency=1 \
    --default-timeout=5 --delete-grace=0 --finished-pod-retention=0 >"$D/controller.log" 2>&1 &
  PIDS+=($!)
  wait_ready "$base/readyz" falcon-apiserver "$D/apiserver.log" "${PIDS[0]}"
  wait_ready "http://127.0.0.1:$CTRL_HTTP/readyz" analyzer-controller "$D/controller.log" "${PIDS[1]}"

  # Seeds, so that links and the document's examples (exp e1, plugin file-stats) reach existing things:
  # an Exp with an uploaded file registered as an artifact, and an analysis of it that has finished.
  expect 201 -XPOST "$base/v1/exps" -d '{"exp_id": "e1", "name": "fuzz seed"}' >/dev/null
  printf 'line one\nline two\n' >"$D/seed.txt"
  local uri
  uri=$(expect 201 -XPUT --data-binary @"$D/seed.txt" -H 'Content-Type: application/octet-stream' \
    "$base/v1/exps/e1/files/seed.txt" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uri"])')
  expect 201 -XPOST "$base/v1/exps/e1/artifacts" \
    -d "{\"artifact_type\": \"file\", \"uri\": \"$uri\"}" >/dev/null
  expect 200 -XPATCH "$base/v1/exps/e1" -d '{"status": "completed"}' >/dev/null
  local id
  id=$(expect 201 -XPOST "$base/v1/analyses" -d '{"exp_id": "e1", "plugin_name": "file-stats"}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["analysis_id"])')
  for _ in $(seq 1 150); do
    if curl -fsS "$base/v1/analyses/$id" | grep -Eq '"status":"(succeeded|failed)"'; then break; fi
    sleep 0.2
  done
  echo "seeded exp e1 and analysis $id ($(curl -fsS "$base/v1/analyses/$id" | grep -Eo '"status":"[a-z]+"'))"

  # The server's own copy of the document must be this one (when it serves one).
  local served
  served=$(curl -s -o "$D/served-openapi.json" -w '%{http_code}' "$base/openapi.json")
  if [ "$served" = 200 ]; then
    "$VENV/bin/python" "$HERE/check_document.py" "$DOC" --same-as "$D/served-openapi.json"
  else
    echo "note: GET /openapi.json answered $served; the fuzzer reads $DOC"
  fi

  # Two fuzzer processes, one for single calls (examples, coverage, fuzzing) and one for call chains
  # (stateful): generating cases is CPU-bound in one Python thread, so two processes use both cores.
  local time_flag=() budget="one round"
  if [ "$max_time" != 0 ]; then time_flag=(--max-time "$max_time"); budget="rounds for $max_time s"; fi
  echo "fuzzing $base from $DOC: seed $seed, $examples examples per operation (single calls) and" \
       "$stateful_examples call chains, $budget, $workers worker(s) per process; reports in $D/report-*"
  local start=$SECONDS part
  local -A rcs=() pids=()
  for part in single stateful; do
    local phases=examples,coverage,fuzzing n_examples=$examples
    if [ "$part" = stateful ]; then phases=stateful; n_examples=$stateful_examples; fi
    mkdir -p "$D/report-$part"
    # shellcheck disable=SC2086  # FUZZ_EXTRA_ARGS is a list of flags
    (cd "$D/report-$part" &&
      exec "$VENV/bin/schemathesis" --config-file "$HERE/schemathesis.toml" run "$DOC" \
      --url "$base" --checks all --mode all --phases "$phases" \
      --max-examples "$n_examples" --seed "$seed" --workers "$workers" ${time_flag[@]+"${time_flag[@]}"} \
      --request-timeout 30 --generation-database none --suppress-health-check all --no-color \
      --output-sanitize false \
      --report junit,json --report-dir "$D/report-$part" --report-json-path "$D/report-$part/run.json" \
      ${FUZZ_EXTRA_ARGS:-}) >"$D/schemathesis-$part.log" 2>&1 &
    pids[$part]=$!
    PIDS+=($!)
  done
  for part in single stateful; do
    rcs[$part]=0
    wait "${pids[$part]}" || rcs[$part]=$?
  done
  local took=$((SECONDS - start)) cases=0 n failed=0
  # CPU seconds, to tell a slow run from a busy machine: the fuzzers (children this shell has waited for)
  # and the two servers (still running).
  local fuzz_cpu server_cpu=0 p
  times >"$D/times.txt"  # not in a pipe: a subshell has no children
  fuzz_cpu=$(tail -n 1 "$D/times.txt" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.0f", t }')
  for p in "${PIDS[0]}" "${PIDS[1]}"; do
    server_cpu=$((server_cpu + $(awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($14 + $15 + $16 + $17) / hz }' \
      "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  for part in single stateful; do
    n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_cases"]["generated"])' \
      "$D/report-$part/run.json" 2>/dev/null || echo 0)
    cases=$((cases + n))
    echo "schemathesis ($part): exit ${rcs[$part]}, $n test cases"
    if [ "${rcs[$part]}" -ne 0 ]; then
      failed=1
      # The failures in full and the summary; the whole output is in the log.
      sed -n '/^=* FAILURES =*$/,$p' "$D/schemathesis-$part.log" | head -n 400
      tail -n 40 "$D/schemathesis-$part.log"
    fi
  done
  echo "schemathesis: $cases test cases in $took s (CPU: fuzzers ${fuzz_cpu} s, servers ${server_cpu} s;" \
       "load average $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ "$failed" -ne 0 ]; then
    echo "FAILED: the fuzzer found failures; output $D/schemathesis-{single,stateful}.log, reports" \
         "$D/report-{single,stateful}, server logs $D/apiserver.log $D/controller.log"
    exit 1
  fi
  if [ "$cases" -lt "$min_cases" ]; then
    echo "FAILED: only $cases test cases were sent in $took s (at least $min_cases expected: a slow or" \
         "busy machine; FUZZ_MAX_TIME or FUZZ_MIN_CASES change the bound); output $D/schemathesis-*.log"
    exit 1
  fi
  echo "PASSED: $cases test cases, no failures (reports in $D/report-{single,stateful})"
}

main() {
  case "${1:-}" in
    install) install ;;
    validate) validate ;;
    run) shift; run "$@" ;;
    *) echo "usage: $0 install | validate | run [BUILD_DIR]" >&2; exit 2 ;;
  esac
}

# On one line, so that bash has read it whole before it runs: editing this file mid-run is then harmless.
main "$@"; exit $?
