#!/usr/bin/env bash
# Produces the agreement table of docs/plugins.md ("Agreement with XProf and XLA"): runs
#   compare_xprof.py    on every *.xplane.pb of the reference data and on TPU xplanes built to XProf's
#                       schema (make_tpu_xplane.py), with XProf's hlo_stats (xprof venv), and
#   compare_xla_cost.py on JAX programs compiled here, with XLA's cost analysis (jax venv),
# then renders both reports as Markdown (agreement_table.py) and, with --update, writes it into
# docs/plugins.md between the agreement markers.
#   agreement.sh [--update] [BUILD_DIR]     (venvs: test/xprof/xprof.sh install, test/xprof/jax.sh install)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
UPDATE=0
if [ "${1:-}" = "--update" ]; then UPDATE=1; shift; fi
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
REF="${FALCON_REFERENCE_DATA:-$ROOT/../shared/reference-data}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
"$BUILD/xprof-venv/bin/python" "$ROOT/test/xprof/make_tpu_xplane.py" "$TMP/tpu_4cores_2programs.xplane.pb" --cores 4
# Non-zero exits are the comparisons' verdicts; the table shows them.
"$BUILD/xprof-venv/bin/python" "$ROOT/test/xprof/compare_xprof.py" --plugin "$BUILD/plugins/xplane-stats" \
  --json "$TMP/xprof.json" "$REF"/xplane/*.xplane.pb "$TMP/tpu_4cores_2programs.xplane.pb" >"$TMP/xprof.log" 2>&1 || true
"$BUILD/jax-venv/bin/python" "$ROOT/test/xprof/compare_xla_cost.py" --plugin "$BUILD/plugins/hlo-stats" \
  --json "$TMP/xla.json" >"$TMP/xla.log" 2>&1 || true
for f in xprof xla; do
  [ -s "$TMP/$f.json" ] || { echo "the $f comparison wrote no report:" >&2; tail -20 "$TMP/$f.log" >&2; exit 1; }
done
if [ "$UPDATE" = 1 ]; then
  python3 "$ROOT/test/xprof/agreement_table.py" "$TMP/xprof.json" "$TMP/xla.json" --update "$ROOT/docs/plugins.md"
else
  python3 "$ROOT/test/xprof/agreement_table.py" "$TMP/xprof.json" "$TMP/xla.json"
fi
