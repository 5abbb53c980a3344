#!/usr/bin/env bash
# Shared by xprof.sh and jax.sh: one pinned package in a Python venv inside the build dir. Idempotent: an
# existing venv whose package has the pinned version and imports is kept, so CI downloads it once.
#   pyvenv_main CMD BUILD_DIR VENV_NAME REQUIREMENT DIST VERSION IMPORT WHEELHOUSE
# CMD is install or python; REQUIREMENT is what pip installs (e.g. "jax[cpu]==0.10.2"); DIST the
# distribution whose version is checked; IMPORT a module that must import; WHEELHOUSE, when set, a local
# wheel folder (pip --no-index) for machines without a package registry.
pyvenv_main() {
  local cmd="$1" build="$2" venv="$2/$3" req="$4" dist="$5" version="$6" import="$7" wheelhouse="$8"
  case "$cmd" in
    python)
      echo "$venv/bin/python" ;;
    install)
      if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$dist" "$version" "$import" <<'PY' 2>/dev/null
import sys, importlib, importlib.metadata as md
importlib.import_module(sys.argv[3])
sys.exit(0 if md.version(sys.argv[1]) == sys.argv[2] else 1)
PY
      then
        echo "$dist $version already installed in $venv"
        return 0
      fi
      mkdir -p "$build"
      python3 -m venv "$venv"
      if [ -n "$wheelhouse" ]; then
        "$venv/bin/pip" install -q --no-index --find-links "$wheelhouse" "$req"
      else
        "$venv/bin/pip" install -q "$req"
      fi
      echo "installed $dist $version into $venv" ;;
    *)
      echo "usage: $0 install|python [BUILD_DIR]" >&2
      return 2 ;;
  esac
}
