#!/usr/bin/env bash
# Builds store_bench and prints the latency of ListExpsAwaitingAnalysis(100) with 100k Exps and 500k
# artifacts on SQLite and on a private MariaDB (started through test/mariadb/mariadb.sh, stopped at exit).
#
#   bench/store_bench.sh [--exps=N] [--artifacts=N] [--iterations=N]
#   BUILD_DIR=build-x bench/store_bench.sh      # another build directory (default: build)
#   BACKENDS=sqlite bench/store_bench.sh        # only one backend (sqlite, mariadb, or both)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
backends=${BACKENDS:-sqlite mariadb}

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja >/dev/null
fi
ninja -C "$build" -j2 store_bench >/dev/null
bench="$build/bin/store_bench"

work=$(mktemp -d "${TMPDIR:-/tmp}/falcon-store-bench.XXXXXX")
cleanup() {
  if [ -f "$work/mariadb/dsn" ]; then "$root/test/mariadb/mariadb.sh" stop "$work/mariadb" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "store_bench on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for b in $backends; do
  case "$b" in
    sqlite)
      "$bench" --db="sqlite://$work/bench.db" "$@"
      ;;
    mariadb)
      FALCON_MARIADB_BUFFER_POOL=512M "$root/test/mariadb/mariadb.sh" start "$work/mariadb"
      "$bench" --db="$(cat "$work/mariadb/dsn")" "$@"
      ;;
    *)
      echo "store_bench.sh: unknown backend '$b' (sqlite, mariadb)" >&2
      exit 2
      ;;
  esac
done
