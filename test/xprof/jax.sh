#!/usr/bin/env bash
# A Python venv inside the build dir with jax[cpu], for comparing hlo-stats with XLA's own cost analysis
# (jax...compile().cost_analysis()). Idempotent, like xprof.sh.
#   jax.sh install [BUILD_DIR]   create BUILD_DIR/jax-venv (default build/) and install jax[cpu]
#   jax.sh python [BUILD_DIR]    print the venv's python path
# JAX_WHEELHOUSE=DIR installs from a local wheel folder (pip --no-index).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
JAX_VERSION="${JAX_VERSION:-0.10.2}"
cmd="${1:-install}"
BUILD="${2:-$ROOT/build}"
VENV="$BUILD/jax-venv"

case "$cmd" in
  python)
    echo "$VENV/bin/python" ;;
  install)
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$JAX_VERSION" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
import jax  # noqa: F401
sys.exit(0 if md.version("jax") == sys.argv[1] else 1)
PY
    then
      echo "jax $JAX_VERSION already installed in $VENV"
      exit 0
    fi
    mkdir -p "$BUILD"
    python3 -m venv "$VENV"
    if [ -n "${JAX_WHEELHOUSE:-}" ]; then
      "$VENV/bin/pip" install -q --no-index --find-links "$JAX_WHEELHOUSE" "jax[cpu]==$JAX_VERSION"
    else
      "$VENV/bin/pip" install -q "jax[cpu]==$JAX_VERSION"
    fi
    echo "installed jax $JAX_VERSION into $VENV" ;;
  *)
    echo "usage: $0 install|python [BUILD_DIR]" >&2
    exit 2 ;;
esac
