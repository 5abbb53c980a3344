#!/usr/bin/env bash
# A Python venv inside the build dir with jax[cpu], for comparing hlo-stats with XLA's own cost analysis
# (jax...compile().cost_analysis()). Idempotent (pyvenv.sh).
#   jax.sh install [BUILD_DIR]   create BUILD_DIR/jax-venv (default build/) and install jax[cpu]
#   jax.sh python [BUILD_DIR]    print the venv's python path
# JAX_WHEELHOUSE=DIR installs from a local wheel folder (pip --no-index).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/pyvenv.sh"
JAX_VERSION="${JAX_VERSION:-0.10.2}"
pyvenv_main "${1:-install}" "${2:-$HERE/../../build}" jax-venv "jax[cpu]==$JAX_VERSION" jax "$JAX_VERSION" jax \
  "${JAX_WHEELHOUSE:-}"
