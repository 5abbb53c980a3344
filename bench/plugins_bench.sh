#!/usr/bin/env bash
# Throughput (MB/s of input) and peak RSS of the built-in plugins on real profiles scaled up, each against
# the obvious Python script a user would write (json / ijson for traces, protobuf for xplane, regexes for
# HLO) and XProf's own converter for the xplane, all in the same run. Prints a table and the ratios.
#
# Usage: bench/plugins_bench.sh [BUILD_DIR]        (default build/; plugins must be built)
# Env:   SIZE_MB=1024        size of the scaled trace and xplane the plugins read
#        BASE_MB=256         size on which every tool runs (plugins, Python baselines, XProf) for the
#                            ratios: the baselines need several times the input in RAM and take minutes
#        HLO_SIZE_MB=128     size of the scaled HLO dump
#        SKIP_JSON=1         skip the json.load baseline (it needs ~8x the trace size in RAM)
#        WORK=DIR            where scaled inputs are cached (default BUILD_DIR/bench-plugins)
#        ONLY="trace xplane hlo"     which inputs to run (default all three)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
PLUG="$BUILD/plugins"
WORK="${WORK:-$BUILD/bench-plugins}"
REF="${FALCON_REFERENCE_DATA:-$ROOT/../shared/reference-data}"
SIZE_MB="${SIZE_MB:-1024}"
BASE_MB="${BASE_MB:-256}"
HLO_SIZE_MB="${HLO_SIZE_MB:-128}"
ONLY="${ONLY:-trace xplane hlo}"
want() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }
VENV="$BUILD/bench-venv"
HELPER="$ROOT/bench/plugins_bench.py"
mkdir -p "$WORK/py"

for p in trace-summary xplane-stats hlo-stats; do
  [ -x "$PLUG/$p" ] || { echo "missing $PLUG/$p: build the plugins first" >&2; exit 1; }
done
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import ijson, google.protobuf" 2>/dev/null; then
  echo "== creating $VENV (ijson, protobuf)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q ijson "protobuf>=4.21,<5"
fi
PY="$VENV/bin/python"
protoc --python_out="$WORK/py" -I "$ROOT/src" "$ROOT/src/plugins/xplane_stats/xplane.proto"
touch "$WORK/py/plugins/__init__.py" "$WORK/py/plugins/xplane_stats/__init__.py"
export XPLANE_PB2_DIR="$WORK/py"
XPROF_PY="$BUILD/xprof-venv/bin/python"
[ -x "$XPROF_PY" ] || "$ROOT/test/xprof/xprof.sh" install "$BUILD"

echo "== scaled inputs (cached in $WORK)"
trace="$WORK/jax_cpu_x${SIZE_MB}MB.trace.json"
trace_base="$WORK/jax_cpu_x${BASE_MB}MB.trace.json"
xplane="$WORK/jax_gpu_x${SIZE_MB}MB.xplane.pb"
xplane_base="$WORK/jax_gpu_x${BASE_MB}MB.xplane.pb"
hlo="$WORK/mlp_step_x${HLO_SIZE_MB}MB.hlo"
for mb in "$SIZE_MB" "$BASE_MB"; do
  t="$WORK/jax_cpu_x${mb}MB.trace.json"; x="$WORK/jax_gpu_x${mb}MB.xplane.pb"
  if want trace; then
    [ -f "$t" ] || "$PY" "$HELPER" scale-trace "$ROOT/testdata/profile/jax_cpu.trace.json.gz" "$t" "$mb"
  fi
  if want xplane; then
    [ -f "$x" ] || "$PY" "$HELPER" scale-xplane "$REF/xplane/tracelens__jax08_gemm.tw003.xplane.pb" "$x" "$mb" 100
  fi
done
if want hlo; then
  [ -f "$hlo" ] || "$PY" "$HELPER" scale-hlo "$ROOT/testdata/hlo/mlp_step/module_0000.jit_mlp_step.cpu_after_optimizations.txt" "$hlo" "$HLO_SIZE_MB"
fi

RESULTS="$WORK/results.tsv"
: > "$RESULTS"
# measure GROUP LABEL INPUT CMD...: wall time and peak RSS with /usr/bin/time; appends to RESULTS.
measure() {
  local group=$1 label=$2 input=$3
  shift 3
  # Every tool starts without the previous tool's output: truncating a 400 MB file costs the next
  # writer about 0.3 s of kernel time, which is not its work.
  rm -f "$out"
  sync
  if ! /usr/bin/time -f "%e %U %S %M" -o "$WORK/time.txt" "$@" > "$WORK/last.log" 2>&1; then
    echo "   $label FAILED:"; tail -5 "$WORK/last.log"; return 0
  fi
  local secs user sys kb mb cpu
  read -r secs user sys kb < "$WORK/time.txt"
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  mb=$(( $(stat -c %s "$input") / 1048576 ))
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$group" "$label" "$mb" "$secs" "$kb" "$cpu" >> "$RESULTS"
  awk -v l="$label" -v mb="$mb" -v s="$secs" -v c="$cpu" -v kb="$kb" 'BEGIN {
    printf "   %-30s %5d MB %8.2f s wall %7.1f MB/s | %8.2f s CPU %7.1f MB/s | %7.0f MB peak RSS\n",
      l, mb, s, (s > 0 ? mb / s : 0), c, (c > 0 ? mb / c : 0), kb / 1024 }'
}

out="$WORK/out.jsonl"
echo "   (wall time depends on the machine's load; CPU time = user + sys of the process)"
if want trace; then
  echo "== trace, ${SIZE_MB} MB: plugin alone"
  measure trace-big "trace-summary" "$trace" "$PLUG/trace-summary" --input "$trace" --output "$out"
fi
if want xplane; then
  echo "== xplane, ${SIZE_MB} MB: plugin alone"
  measure xplane-big "xplane-stats" "$xplane" "$PLUG/xplane-stats" --input "$xplane" --output "$out"
fi
if want trace; then
  echo "== trace, ${BASE_MB} MB: plugin vs Python"
  measure trace "trace-summary" "$trace_base" "$PLUG/trace-summary" --input "$trace_base" --output "$out"
  measure trace "python ijson" "$trace_base" "$PY" "$HELPER" py-trace-ijson "$trace_base"
  if [ "${SKIP_JSON:-0}" != 1 ]; then
    measure trace "python json.load" "$trace_base" "$PY" "$HELPER" py-trace-json "$trace_base"
  fi
fi
if want xplane; then
  echo "== xplane, ${BASE_MB} MB: plugin vs Python protobuf vs XProf"
  measure xplane "xplane-stats" "$xplane_base" "$PLUG/xplane-stats" --input "$xplane_base" --output "$out"
  measure xplane "python protobuf" "$xplane_base" "$PY" "$HELPER" py-xplane "$xplane_base"
  measure xplane "xprof hlo_stats converter" "$xplane_base" "$XPROF_PY" "$HELPER" xprof "$xplane_base" hlo_stats
fi
if want hlo; then
  # Three baselines: the regex scan (opcode counts and dot FLOPs only, far less work than hlo-stats), the
  # same scan writing one JSONL record per instruction as hlo-stats does, and those records with the cost
  # model (FLOPs, transcendentals, bytes per instruction and module totals): the same work as hlo-stats.
  echo "== hlo, ${HLO_SIZE_MB} MB: plugin vs Python regexes"
  measure hlo "hlo-stats" "$hlo" "$PLUG/hlo-stats" --input "$hlo" --output "$out"
  measure hlo "python regex" "$hlo" "$PY" "$HELPER" py-hlo "$hlo"
  measure hlo "python regex + JSONL records" "$hlo" "$PY" "$HELPER" py-hlo-records "$hlo" "$out"
  measure hlo "python records + cost model" "$hlo" "$PY" "$HELPER" py-hlo-cost "$hlo" "$out"
fi
rm -f "$out"

echo "== ratios (other tool / plugin on the same input; wall and CPU time) and the plugins' peak RSS"
awk -F'\t' '
  { g=$1; if (!(g in first)) { first[g]=$2; t[g]=$4; c[g]=$6; rss[g]=$5; mb[g]=$3; order[++n]=g; next }
    printf "   %-6s %-28s %6.1fx the time of %-14s (CPU %6.1fx; RSS %6.0f MB vs %5.0f MB)\n",
      g, $2, ($4 / t[g]), first[g], ($6 / (c[g] > 0 ? c[g] : 0.01)), $5/1024, rss[g]/1024 }
  END { for (i = 1; i <= n; i++) { g = order[i];
          printf "   %-10s %-14s peak RSS %5.0f MB = %4.1f%% of the %d MB input\n", g, first[g], rss[g]/1024,
            100 * rss[g] / 1024 / (mb[g] > 0 ? mb[g] : 1), mb[g] } }
' "$RESULTS"
