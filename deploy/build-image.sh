#!/usr/bin/env bash
# Builds the Falcon Data Analyzer image from deploy/Dockerfile without a container registry:
#   1. makes the base images debian:bookworm and debian:bookworm-slim from Debian's packages with mmdebstrap,
#      from the mirror(s) this machine's apt sources name (read from /etc/apt/sources.list* at run time);
#      the root filesystem tarballs are cached under $FALCON_IMAGE_CACHE keyed by a hash of their inputs;
#   2. imports them into local container storage under those names;
#   3. builds deploy/Dockerfile with buildah (daemonless, --pull=never, layers cached in container storage);
#   4. prints the image digest and size, and optionally exports it as an OCI layout or archive.
#
# Usage: deploy/build-image.sh [--tag NAME] [--export-oci DIR] [--export-archive FILE] [--bases-only]
#                              [--refresh-bases]
# Environment: FALCON_IMAGE_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/falcon/image), FALCON_IMAGE_TAG
#   (default localhost/falcon-analyzer:dev), JOBS (compile jobs inside the build, default nproc),
#   FALCON_IMAGE_ISOLATION (buildah --isolation: oci, chroot or rootless; default oci, falls back to chroot).
# Idempotent: a rerun with unchanged inputs reuses the cached tarballs, the imported base images and the
# cached build layers.
set -euo pipefail
cd "$(dirname "$0")/.."
# podman warns about CNI configuration it does not use here (builds and runs use the host network or none).
podman() { command podman --log-level=error "$@"; }
ROOT=$PWD

TAG=${FALCON_IMAGE_TAG:-localhost/falcon-analyzer:dev}
CACHE=${FALCON_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/falcon/image}
JOBS=${JOBS:-$(nproc)}
ISOLATION=${FALCON_IMAGE_ISOLATION:-}
EXPORT_OCI=""
EXPORT_ARCHIVE=""
BASES_ONLY=0
REFRESH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG=$2; shift 2 ;;
    --export-oci) EXPORT_OCI=$2; shift 2 ;;
    --export-archive) EXPORT_ARCHIVE=$2; shift 2 ;;
    --bases-only) BASES_ONLY=1; shift ;;
    --refresh-bases) REFRESH=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

START=$(date +%s)
step() { printf '==> [%3ss] %s\n' "$(( $(date +%s) - START ))" "$*"; }
die() { echo "build-image.sh: $*" >&2; exit 1; }

# --- tools (Debian packages, installed once) -------------------------------------------------------------
TOOLS=(mmdebstrap buildah podman umoci crun)
missing=()
for t in "${TOOLS[@]}"; do command -v "$t" >/dev/null || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]} (Debian packages)"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then command -v sudo >/dev/null || die "need root or sudo to install ${missing[*]}"; SUDO=sudo; fi
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    mmdebstrap buildah podman umoci crun uidmap fuse-overlayfs netavark >/dev/null
fi

# --- apt sources: the Debian entries of this machine's apt configuration ---------------------------------
# Prints one-line "deb [signed-by=…] URI SUITE COMPONENTS" entries for the bookworm suites, from both the
# one-line (*.list) and the deb822 (*.sources) formats.
debian_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # Drop the [options] field to find the suite; print the entry as it is.
    grep -E '^[[:space:]]*deb[[:space:]]' "$f" | awk '{ l = $0; sub(/\[[^]]*\]/, ""); if ($3 ~ /^bookworm/) print l }' || true
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'function flush() {
           if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no" && uris != "")
             { n = split(suites, s, " "); m = split(uris, u, " ");
               for (j = 1; j <= m; j++) for (i = 1; i <= n; i++) if (s[i] ~ /^bookworm/)
                 print "deb " (key != "" ? "[signed-by=" key "] " : "") u[j] " " s[i] " " comps }
           types = uris = suites = comps = key = ""; enabled = "yes" }
         BEGIN { enabled = "yes" }
         /^[[:space:]]*#/ { next }
         /^[[:space:]]*$/ { flush(); next }
         { k = $1; sub(/:$/, "", k); $1 = ""; v = $0; sub(/^[[:space:]]+/, "", v)
           if (k == "Types") types = v; else if (k == "URIs") uris = v; else if (k == "Suites") suites = v
           else if (k == "Components") comps = v; else if (k == "Signed-By") key = v; else if (k == "Enabled") enabled = v }
         END { flush() }' "$f"
  done
}
mkdir -p "$CACHE/rootfs" "$CACHE/tmp"
SOURCES_FILE="$CACHE/tmp/sources.list"
debian_sources | sort -u >"$SOURCES_FILE"
[ -s "$SOURCES_FILE" ] || die "no bookworm entry in /etc/apt/sources.list or /etc/apt/sources.list.d/ (need Debian's main archive)"
grep -qE ' bookworm( |$)' "$SOURCES_FILE" || die "the apt sources have no 'bookworm' suite entry: $(tr '\n' ';' <"$SOURCES_FILE")"
step "apt sources for the base images: $(awk '{print $(NF-1)}' "$SOURCES_FILE" | tr '\n' ' ')"

# --- base root filesystems (cached) ----------------------------------------------------------------------
# bookworm: minbase (Essential + Priority: required + apt), as the official debian:bookworm.
# bookworm-slim: the same with the slim variant's dpkg path excludes (no docs, man pages, locales), which
# stay in the image so later apt-get installs honour them as well.
SLIM_EXCLUDES=(
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/groff/*'
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
  --dpkgopt='path-exclude=/usr/share/linda/*' --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-include=/usr/share/locale/locale.alias'
)
# Merged /usr the way the official images have it: bookworm's init-system-helpers depends on
# "usrmerge | usr-is-merged", and without this hook apt takes usrmerge, which drags perl and its modules
# (about 50 MB) into the root filesystem. The hook sets up the /usr symlinks itself and installs the tiny
# usr-is-merged. Only the runtime base needs it: the build stage installs perl anyway (dpkg-dev), so its
# base (and the cached compile layers on top of it) is left as it is.
MERGED_USR=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
ARCH=$(dpkg --print-architecture)
MMDEBSTRAP_VERSION=$(mmdebstrap --version | head -1)

# make_base NAME OPTIONS...: prints the cached tarball path for image NAME, building it when missing.
make_base() {
  local name=$1; shift
  local key
  key=$(printf '%s\n' "$name" bookworm minbase "$ARCH" "$MMDEBSTRAP_VERSION" "$@" | cat - "$SOURCES_FILE" \
        | sha256sum | cut -c1-16)
  local tar="$CACHE/rootfs/$name-$key.tar"
  if [ -s "$tar" ] && [ "$REFRESH" = 0 ]; then
    step "base $name: cached ($tar)" >&2
  else
    step "base $name: mmdebstrap --variant=minbase bookworm (key $key)" >&2
    rm -f "$tar.partial"
    mmdebstrap --quiet --variant=minbase --architectures="$ARCH" --format=tar "$@" \
      bookworm "$tar.partial" "$SOURCES_FILE" >&2
    mv "$tar.partial" "$tar"
    # Older tarballs of this name are stale inputs.
    # (The key is 16 hex digits, so bookworm-* does not match the bookworm-slim-* tarballs.)
    find "$CACHE/rootfs" -name "$name-$(printf '%.0s[0-9a-f]' {1..16}).tar" ! -name "$(basename "$tar")" -delete
  fi
  echo "$tar $key"
}

# import_base TAR KEY IMAGE: imports TAR as IMAGE unless it holds that key already.
import_base() {
  local tar=$1 key=$2 image=$3
  local have
  have=$(podman image inspect --format '{{index .Labels "org.falcon.rootfs-key"}}' "$image" 2>/dev/null || true)
  if [ "$have" = "$key" ]; then
    step "image $image: up to date (key $key)"
    return
  fi
  step "image $image: importing $(du -h "$tar" | cut -f1) root filesystem"
  podman import --quiet --change 'CMD ["bash"]' --change "LABEL org.falcon.rootfs-key=$key" \
    "$tar" "$image" >/dev/null
}

read -r BOOKWORM_TAR BOOKWORM_KEY < <(make_base bookworm)
read -r SLIM_TAR SLIM_KEY < <(make_base bookworm-slim "${MERGED_USR[@]}" "${SLIM_EXCLUDES[@]}")
import_base "$BOOKWORM_TAR" "$BOOKWORM_KEY" docker.io/library/debian:bookworm
import_base "$SLIM_TAR" "$SLIM_KEY" docker.io/library/debian:bookworm-slim
[ "$BASES_ONLY" = 1 ] && { step "bases ready"; exit 0; }

# --- the image -------------------------------------------------------------------------------------------
# RUN steps need a container runtime: oci (crun in new namespaces) where that works, else chroot isolation
# (what buildah uses inside an unprivileged container).
if [ -z "$ISOLATION" ]; then
  if buildah from --pull=never --quiet --name falcon-isolation-probe docker.io/library/debian:bookworm-slim >/dev/null 2>&1 \
     && buildah run --isolation=oci falcon-isolation-probe true >/dev/null 2>&1; then
    ISOLATION=oci
  else
    ISOLATION=chroot
  fi
  buildah rm falcon-isolation-probe >/dev/null 2>&1 || true
fi
step "building $TAG from deploy/Dockerfile (buildah bud --pull=never --layers, isolation $ISOLATION, -j$JOBS)"
# --format docker: the OCI image config has no SHELL, so buildah would ignore the Dockerfile's SHELL (bash
# with pipefail) and run the RUN steps with /bin/sh, as docker build would not.
buildah bud --pull=never --layers --format docker --isolation="$ISOLATION" --network=host \
  --build-arg BUILD_JOBS="$JOBS" -f deploy/Dockerfile -t "$TAG" "$ROOT"

ID=$(podman image inspect --format '{{.Id}}' "$TAG")
DIGEST=$(podman image inspect --format '{{.Digest}}' "$TAG")
SIZE=$(podman image inspect --format '{{.Size}}' "$TAG")
step "image $TAG"
echo "    id:     $ID"
echo "    digest: $DIGEST"
echo "    size:   $SIZE bytes ($(( SIZE / 1000000 )) MB uncompressed)"

if [ -n "$EXPORT_OCI" ]; then
  step "exporting an OCI layout to $EXPORT_OCI (tag dev; unpack with: umoci unpack --image $EXPORT_OCI:dev DIR)"
  rm -rf "$EXPORT_OCI"
  podman save --quiet --format oci-dir -o "$EXPORT_OCI" "$TAG"
  # podman's oci-dir names the image by its reference; tag it dev as well for umoci (the source is
  # LAYOUT:REFERENCE; the reference may hold ':' itself).
  umoci tag --image "$EXPORT_OCI:$(umoci ls --layout "$EXPORT_OCI" | head -1)" dev \
    || die "cannot tag the exported image dev in $EXPORT_OCI (umoci tag)"
fi
if [ -n "$EXPORT_ARCHIVE" ]; then
  step "exporting an OCI archive to $EXPORT_ARCHIVE"
  rm -f "$EXPORT_ARCHIVE"
  podman save --quiet --format oci-archive -o "$EXPORT_ARCHIVE" "$TAG"
fi
step "done"
