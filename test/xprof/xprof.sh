#!/usr/bin/env bash
# The XProf side of the comparison test: a Python venv inside the build dir with the `xprof` wheel.
#   xprof.sh install [BUILD_DIR]   create BUILD_DIR/xprof-venv (default build/) and install xprof; idempotent,
#                                  so CI pays for the download once. With XPROF_WHEELHOUSE=DIR the wheels come
#                                  from that local folder (pip --no-index), for machines without a registry.
#   xprof.sh python [BUILD_DIR]    print the venv's python path
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
XPROF_VERSION="${XPROF_VERSION:-2.24.2}"
cmd="${1:-install}"
BUILD="${2:-$ROOT/build}"
VENV="$BUILD/xprof-venv"

case "$cmd" in
  python)
    echo "$VENV/bin/python" ;;
  install)
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$XPROF_VERSION" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
import xprof.convert.raw_to_tool_data  # noqa: F401  (the converter must import)
sys.exit(0 if md.version("xprof") == sys.argv[1] else 1)
PY
    then
      echo "xprof $XPROF_VERSION already installed in $VENV"
      exit 0
    fi
    mkdir -p "$BUILD"
    python3 -m venv "$VENV"
    if [ -n "${XPROF_WHEELHOUSE:-}" ]; then
      "$VENV/bin/pip" install -q --no-index --find-links "$XPROF_WHEELHOUSE" "xprof==$XPROF_VERSION"
    else
      "$VENV/bin/pip" install -q "xprof==$XPROF_VERSION"
    fi
    echo "installed xprof $XPROF_VERSION into $VENV" ;;
  *)
    echo "usage: $0 install|python [BUILD_DIR]" >&2
    exit 2 ;;
esac
