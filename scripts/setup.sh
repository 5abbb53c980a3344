#!/usr/bin/env bash
# Installs every build and test dependency: Debian's packages, and the API fuzzer's venv from PyPI
# (test/fuzz/schemathesis.sh install). Idempotent: when everything is present it only checks and returns.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  libsqlite3-dev sqlite3 libmariadb-dev mariadb-server mariadb-client
  libcurl4-openssl-dev libssl-dev zlib1g-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libsimdjson-dev libcjose-dev libjansson-dev
  bubblewrap libseccomp-dev libcap-dev util-linux procps psmisc wrk python3 python3-venv crun acl
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all build and test dependencies are installed"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The Debian package starts a system MariaDB; our tests run private instances, so stop it if it was started.
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now mariadb >/dev/null 2>&1 || true; fi
  echo "setup: done"
fi

# The API fuzzer (Schemathesis, pinned, from PyPI) in a cached venv keyed by its version; idempotent.
bash "$(dirname "$0")/../test/fuzz/schemathesis.sh" install
