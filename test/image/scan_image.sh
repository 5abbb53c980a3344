#!/usr/bin/env bash
# Scans the image deploy/build-image.sh built: no compiler, no apt lists or package caches, default user
# 65532, every binary starts, every plugin of deploy/plugins.yaml is on PATH, python3 imports the analysis
# libraries (docs/analysis-environment.md), prints the size (fails above FALCON_IMAGE_MAX_MB, 250) and what
# each layer adds, then runs analyses in the image (test/image/run_analyses.sh: the plugins, the demo's
# online Python analysis, the examples of docs/analysis-examples/).
# Exits 77 (skipped) when buildah/podman are missing or the image was not built.
# Usage: test/image/scan_image.sh [IMAGE]   (default $FALCON_IMAGE_TAG or localhost/falcon-analyzer:dev)
#
# Commands run in a buildah working container with chroot isolation as the image's user: crun cannot
# start containers on every CI machine (see deploy/README.md), chroot isolation works wherever the build does.
set -uo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${1:-${FALCON_IMAGE_TAG:-localhost/falcon-analyzer:dev}}
MAX_MB=${FALCON_IMAGE_MAX_MB:-250}

# shellcheck source=test/image/image_lib.sh
source test/image/image_lib.sh

# --- the filesystem --------------------------------------------------------------------------------------
found=""
for c in gcc cc g++ c++ clang clang++ cpp ld as make cmake; do
  for d in usr/bin bin usr/local/bin; do [ -e "$MNT/$d/$c" ] && found+=" /$d/$c"; done
done
[ -z "$found" ] && ok "no compiler or build tool" || bad "build tools in the image:$found"
lists=$(find "$MNT/var/lib/apt/lists" -mindepth 1 -type f ! -name lock 2>/dev/null | head -3)
[ -z "$lists" ] && ok "no apt lists" || bad "apt lists left: $lists"
caches=$(find "$MNT/var/cache/apt" "$MNT/root/.cache" "$MNT/var/cache/pip" -type f \( -name '*.deb' -o -name '*.bin' -o -path '*pip*' \) 2>/dev/null | head -3)
[ -z "$caches" ] && ok "no package caches" || bad "package caches left: $caches"

# --- the user --------------------------------------------------------------------------------------------
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "${user%%:*}" = 65532 ] && ok "image user $user" || bad "image user is '$user', want 65532"
uid=$(run id -u 2>&1)
[ "$uid" = 65532 ] && ok "runs as uid $uid" || bad "runs as uid '$uid', want 65532"

# --- the binaries and plugins ----------------------------------------------------------------------------
# The four binaries the manifests and the CLI users run print their version; any other binary of the image
# starts with --version or --help.
shopt -s nullglob
for b in falcon-apiserver analyzer-controller falcon-runner falcon; do
  [ -x "$MNT/opt/falcon/bin/$b" ] || { bad "$b is not in /opt/falcon/bin"; continue; }
  v=$(run "$b" --version 2>&1) && [ -n "$v" ] && ok "$b --version: $v" || bad "$b --version: $(echo "$v" | tail -2 | tr '\n' ' ')"
done
for path in "$MNT"/opt/falcon/bin/*; do
  b=$(basename "$path")
  case "$b" in falcon-apiserver|analyzer-controller|falcon-runner|falcon) continue ;; esac
  if run "$b" --version >/dev/null 2>&1; then ok "$b --version"
  elif run "$b" --help >/dev/null 2>&1; then ok "$b --help"
  else bad "$b starts with neither --version nor --help: $(run "$b" --help 2>&1 | tail -2 | tr '\n' ' ')"; fi
done
plugins=$(sed -n 's/^[[:space:]]*command:[[:space:]]*\([^[:space:]#]*\).*/\1/p' deploy/plugins.yaml)
[ -n "$plugins" ] || bad "no plugin command in deploy/plugins.yaml"
for p in $plugins; do
  where=$(run sh -c "command -v $p" 2>/dev/null)
  [ -n "$where" ] && ok "plugin $p on PATH ($where)" || bad "plugin $p (deploy/plugins.yaml) is not on PATH"
done

# --- the analysis environment ----------------------------------------------------------------------------
py=$(run python3 -c 'import numpy, pandas, google.protobuf, xplane_pb2, sys
print(sys.version.split()[0], "numpy", numpy.__version__, "pandas", pandas.__version__, "protobuf", google.protobuf.__version__)' 2>&1)
[ $? -eq 0 ] && ok "python3 $py" || bad "python3 imports: $py"
sh=$(run bash -c 'echo "$BASH_VERSION"; sha256sum --version | head -1' 2>&1 | tr '\n' ' ')
[ $? -eq 0 ] && ok "bash and coreutils: $sh" || bad "bash/coreutils: $sh"

# --- size ------------------------------------------------------------------------------------------------
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
mb=$((size / 1000000))
echo "size $IMAGE: $size bytes ($mb MB uncompressed; goal < $MAX_MB MB)"
du -sm "$MNT"/usr/lib/python3 "$MNT"/usr/lib/x86_64-linux-gnu "$MNT"/opt/falcon 2>/dev/null | sed "s#$MNT##; s/^/     /"
# What each layer adds (the base, the packages RUN, the COPYs of the build stage's outputs).
podman history --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE" | awk -F '\t' '$1 !~ /^0 ?B$/ { printf "     %-9s %s\n", $1, substr($2, 1, 90) }'
[ "$mb" -lt "$MAX_MB" ] && ok "size $mb MB < $MAX_MB MB" || bad "size $mb MB >= $MAX_MB MB (FALCON_IMAGE_MAX_MB)"

# --- analyses in the image (test/image/run_analyses.sh) ---------------------------------------------------
echo "analyses in the image (test/image/run_analyses.sh):"
bash test/image/run_analyses.sh "$IMAGE" | sed 's/^/  /'
[ "${PIPESTATUS[0]}" -eq 0 ] && ok "analyses in the image" || bad "analyses in the image (above)"

[ "$FAILS" -eq 0 ] && { echo "image scan: all checks passed"; exit 0; }
echo "image scan: $FAILS check(s) failed"
exit 1
