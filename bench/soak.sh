#!/usr/bin/env bash
# The soak (bench/soak.py): many analyses on MariaDB, the GCS emulator and two controller replicas while
# every fault the system promises to survive is injected; prints one table of figures per runtime and exits
# non-zero on any lost, stuck, duplicated or unexpectedly failed analysis (its work dir is then kept).
#
#   bench/soak.sh [--quick] [BUILD_DIR]
#
# Full: 1,000 analyses over 6 minutes, a 60 s object-store outage, 64 slow clients (about 10 minutes per
# runtime). --quick (what ctest's soak_quick runs): 80 analyses over 60 s, a 15 s outage, 16 slow clients for
# 8 s, 2 s between faults (about 2.5 minutes per runtime).
# Env: RUNTIMES="local kubernetes" (the runtimes to soak, in turn), SOAK_ARGS (more bench/soak.py flags).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
QUICK=0
if [ "${1:-}" = --quick ]; then QUICK=1; shift; fi
BUILD=$(cd "${1:-$HERE/../build}" && pwd)
RUNTIMES=${RUNTIMES:-local kubernetes}
if [ "$QUICK" = 1 ]; then
  ARGS=(--analyses=80 --submit-seconds=60 --outage=15 --slow-clients=16 --slow-seconds=8 --fault-gap=2 --settle=300)
else
  ARGS=(--analyses=1000 --submit-seconds=360 --outage=60 --slow-clients=64 --slow-seconds=20 --fault-gap=8 --settle=600)
fi
rc=0
for rt in $RUNTIMES; do
  if [ "$rt" = kubernetes ]; then
    "$HERE/../test/k8s/control-plane.sh" build >&2
  fi
  echo "==> soak on the $rt runtime: bench/soak.py ${ARGS[*]} ${SOAK_ARGS:-}"
  # shellcheck disable=SC2086
  python3 "$HERE/soak.py" --build "$BUILD" --runtime "$rt" "${ARGS[@]}" ${SOAK_ARGS:-} || rc=1
done
exit $rc
