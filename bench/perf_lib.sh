# Whole-machine CPU sampling for the bench scripts (sourced). With PERF_DIR set, perf_start NAME starts
# `perf record -a` (the kernel's cpu-clock: no hardware counters are needed) into PERF_DIR/perf.NAME.data,
# and perf_stop NAME stops it and prints each process' share of the machine's samples (swapper is idle
# time); the per-process and per-library reports are left next to the data. Without PERF_DIR both do
# nothing.
PERF_PID=""
perf_start() {  # $1: name
  [ -n "${PERF_DIR:-}" ] || return 0
  command -v perf >/dev/null || { echo "PERF_DIR is set but perf is not installed (Debian: linux-perf)" >&2; return 1; }
  mkdir -p "$PERF_DIR"
  perf record -a -g -e cpu-clock -F 499 -o "$PERF_DIR/perf.$1.data" >/dev/null 2>&1 &
  PERF_PID=$!
  sleep 0.5
}
perf_stop() {  # $1: name; prints each process' share of the machine's samples
  [ -n "$PERF_PID" ] || return 0
  kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true
  PERF_PID=""
  perf report -i "$PERF_DIR/perf.$1.data" --no-children --sort comm --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' >"$PERF_DIR/perf.$1.comm.txt" || true
  perf report -i "$PERF_DIR/perf.$1.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | head -40 >"$PERF_DIR/perf.$1.dso.txt" || true
  echo "  CPU by process while $1 ran (perf, whole machine): $(head -8 "$PERF_DIR/perf.$1.comm.txt" \
    | awk '{ printf "%s %s, ", $2, $1 }' | sed 's/, $//') (swapper: idle)"
}
