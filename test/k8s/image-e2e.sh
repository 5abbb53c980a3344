#!/usr/bin/env bash
# Runs the Kubernetes end-to-end tests with every container of every Pod in an OCI container (crun) made
# from the image deploy/Dockerfile builds — the code a team deploys, not the build tree:
#   1. deploy/build-image.sh builds the image (idempotent; layers cached) and exports an OCI layout;
#   2. umoci unpacks it into a bundle (config.json + rootfs/), cached by the image's digest;
#   3. kube_e2e_test runs with FALCON_KUBELET_RUNTIME=crun and FALCON_KUBELET_IMAGE_BUNDLE=<bundle>.
# Not part of .ci/run: a cold image build takes about half an hour on two cores (docs/kubernetes.md).
#
# Usage: test/k8s/image-e2e.sh [BUILD_DIR] [-- GTEST_ARGS...]   (default: build, all tests of the file)
# Environment: FALCON_IMAGE_CACHE as for deploy/build-image.sh; the OCI layout and bundles go beneath it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build
if [ $# -gt 0 ] && [ "$1" != "--" ]; then BUILD=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ -x "$BUILD/tests/kube_e2e_test" ] || { echo "image-e2e.sh: $BUILD/tests/kube_e2e_test is missing; build first" >&2; exit 1; }

CACHE=${FALCON_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/falcon/image}
OCI="$CACHE/oci"
echo "==> building the image (deploy/build-image.sh)"
bash deploy/build-image.sh --export-oci "$OCI"
MANIFEST=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1][:16])' "$OCI/index.json")
BUNDLE="$CACHE/bundle-$MANIFEST"
if [ ! -f "$BUNDLE/config.json" ]; then
  echo "==> unpacking the image into $BUNDLE (umoci unpack)"
  # Older bundles are of older images.
  find "$CACHE" -maxdepth 1 -name 'bundle-*' -exec rm -rf {} +
  umoci unpack --image "$OCI:dev" "$BUNDLE.partial" >/dev/null
  mv "$BUNDLE.partial" "$BUNDLE"
else
  echo "==> bundle of this image: $BUNDLE (cached)"
fi

echo "==> kube_e2e_test in containers of the image"
cd "$BUILD/test/k8s"
FALCON_KUBELET_RUNTIME=crun FALCON_KUBELET_IMAGE_BUNDLE="$BUNDLE" FALCON_KUBELET_HOST_DIRS=/tmp \
  FALCON_KUBELET_POD_MAX_PIDS=256 exec ../../tests/kube_e2e_test "$@"
