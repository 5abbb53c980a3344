#!/usr/bin/env bash
# Every benchmark with its ceiling in one run, printed as one table (bench/all.py --help):
#   bench/all.sh [--quick] [--write-docs] [--only "apiserver kube controller plugins"] [BUILD_DIR]
# --quick finishes in under 5 minutes on 2 cores; --write-docs replaces the table in docs/benchmarks.md.
set -euo pipefail
exec python3 "$(cd "$(dirname "$0")" && pwd)/all.py" "$@"
