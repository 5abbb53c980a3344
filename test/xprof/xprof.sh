#!/usr/bin/env bash
# The XProf side of the comparison test: a Python venv inside the build dir with the `xprof` wheel.
#   xprof.sh install [BUILD_DIR]   create BUILD_DIR/xprof-venv (default build/) and install xprof; idempotent
#                                  (pyvenv.sh), so CI pays for the download once. With XPROF_WHEELHOUSE=DIR the
#                                  wheels come from that local folder (pip --no-index), for machines without a registry.
#   xprof.sh python [BUILD_DIR]    print the venv's python path
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/pyvenv.sh"
XPROF_VERSION="${XPROF_VERSION:-2.24.2}"
# The converter must import, not only the package.
pyvenv_main "${1:-install}" "${2:-$HERE/../../build}" xprof-venv "xprof==$XPROF_VERSION" xprof "$XPROF_VERSION" \
  xprof.convert.raw_to_tool_data "${XPROF_WHEELHOUSE:-}"
