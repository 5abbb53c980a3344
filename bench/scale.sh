#!/usr/bin/env bash
# The system at a team's scale on a real MariaDB (issue 16, "measure at scale"): bulk-loads 100,000 completed
# Exps, 500,000 artifacts and 1,000,000 analysis records (100,000 of them non-terminal) into a private
# MariaDB (test/mariadb/mariadb.sh), then measures against falcon-apiserver and analyzer-controller
# --runtime=local:
#   (a) gRPC ListExpsAwaitingAnalysis(100) p50/p99                       goal < 20 ms
#   (b) GET /v1/analyses, ?status=pending,running and ?status=failed,cancelled, first page p50/p99
#                                                                         goal < 20 ms
#   (c) controller start -> /readyz 200, and -> its work queue drained     goal < 60 s
#   (d) peak RSS (VmHWM) of the controller and of the API server         goal < 512 MiB
# and prints a markdown table; exits 1 when a goal is missed (the table names it). bench/scale.py --help
# says what is loaded and what recovery does with it.
#
#   bench/scale.sh [BUILD_DIR]            (default: build)
#   SCALE=0.01 bench/scale.sh             every count times SCALE (0.01: 10,000 records; default 1)
#   KEEP=1 bench/scale.sh                 keep the work dir (logs, EXPLAIN output); kept anyway on failure
#   SCALE_ARGS="--iterations=500 --steady-seconds=40" bench/scale.sh   more scale.py flags
# Needs the targets falcon-apiserver analyzer-controller falcon-runner falcon-localpod scale_bench.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
scale=${SCALE:-1}

for b in falcon-apiserver analyzer-controller falcon-runner falcon-localpod scale_bench; do
  if [ ! -x "$build/bin/$b" ]; then
    echo "scale.sh: missing $build/bin/$b; build it: ninja -C $build falcon-apiserver analyzer-controller" \
         "falcon-runner falcon-localpod scale_bench" >&2
    exit 2
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/falcon-scale.XXXXXX")
db="$work/mariadb"
rc=1
cleanup() {
  if [ -f "$db/dsn" ]; then "$root/test/mariadb/mariadb.sh" stop "$db" >/dev/null 2>&1 || true; fi
  if [ "${KEEP:-0}" = 1 ] || [ "$rc" != 0 ]; then
    echo "scale.sh: work dir kept: $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1 GiB of buffer pool, as a team's database server would have: at SCALE=1 the data set is 1.4 GiB on disk
# (analysis_records 1.2 GiB with its indexes), so the indexes and the newest rows stay in memory; the
# default 128M would measure the disk instead.
FALCON_MARIADB_BUFFER_POOL=${FALCON_MARIADB_BUFFER_POOL:-1G} "$root/test/mariadb/mariadb.sh" start "$db"

set +e
# shellcheck disable=SC2086
python3 "$here/scale.py" --build "$build" --mariadb-sh "$root/test/mariadb/mariadb.sh" --db-dir "$db" \
  --work "$work" --scale "$scale" ${SCALE_ARGS:-}
rc=$?
set -e
exit $rc
