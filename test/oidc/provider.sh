#!/usr/bin/env bash
# The test OpenID provider: zitadel/oidc's `op` package in a small Go program (provider/main.go), serving
# discovery, a JWKS, a token endpoint (client_credentials) and a test-only key rotation over HTTPS.
#
#   test/oidc/provider.sh build              build (or reuse) test/oidc/.bin/oidc-provider
#   test/oidc/provider.sh inputs-hash        the hash of its Go sources (a CI cache key for .bin/)
#   test/oidc/provider.sh start DIR          start on a free loopback port; writes DIR/issuer and DIR/ca.pem
#   test/oidc/provider.sh stop DIR           stop the provider started for DIR
#   test/oidc/provider.sh env DIR            print ISSUER= and CA_FILE= (shell assignments)
#
# Environment: GOMODCACHE / GOCACHE, the Go caches (the first build takes about a minute on 2 cores).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="${HERE}/.bin"
BIN="${BIN_DIR}/oidc-provider"
SRC="${HERE}/provider"

die() { echo "oidc-provider: $*" >&2; exit 1; }

# The binary is reused only when it was built from exactly these inputs (not by modification times: a
# cache restored by CI has fresh ones).
inputs_hash() {
  (cd "${SRC}" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 | sort -z |
    xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

build() {
  command -v go >/dev/null 2>&1 || die "the go command is needed to build the test OpenID provider (Go >= 1.26)"
  mkdir -p "${BIN_DIR}"
  # One build at a time (several test binaries may start providers concurrently).
  exec 9>"${BIN_DIR}/.build.lock"
  flock 9
  local want
  want="$(inputs_hash)"
  if [[ -x "${BIN}" && "$(cat "${BIN}.inputs" 2>/dev/null || true)" == "${want}" ]]; then
    flock -u 9
    return 0
  fi
  echo "oidc-provider: building ${BIN} (the first build takes about a minute; later ones use the Go cache)" >&2
  (cd "${SRC}" && CGO_ENABLED=0 go build -p 2 -trimpath -ldflags="-s -w" -o "${BIN}.tmp" .) \
    || die "build failed (see the go output above)"
  mv "${BIN}.tmp" "${BIN}"
  echo "${want}" >"${BIN}.inputs"
  flock -u 9
}

# Stops the process whose pid is in FILE: TERM, then KILL after 10 s.
stop_pidfile() {
  local f="$1" pid
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  if kill -0 "${pid}" 2>/dev/null; then
    kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "$f"
}

cmd_start() {
  local dir="$1"
  mkdir -p "${dir}"
  dir="$(cd "${dir}" && pwd)"
  [[ -f "${dir}/provider.pid" ]] && kill -0 "$(cat "${dir}/provider.pid")" 2>/dev/null \
    && die "a provider is already running for ${dir}; stop it first"
  build
  rm -f "${dir}/issuer" "${dir}/ca.pem"
  setsid "${BIN}" --dir="${dir}" >>"${dir}/provider.log" 2>&1 </dev/null &
  echo $! >"${dir}/provider.pid"
  local deadline=$((SECONDS + 60))
  until [[ -f "${dir}/issuer" ]] && curl -sf --max-time 2 --cacert "${dir}/ca.pem" \
      "$(cat "${dir}/issuer")/.well-known/openid-configuration" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "${dir}/provider.pid")" 2>/dev/null; then
      tail -30 "${dir}/provider.log" >&2
      die "the provider exited during startup (log: ${dir}/provider.log)"
    fi
    if ((SECONDS > deadline)); then
      tail -30 "${dir}/provider.log" >&2
      die "the provider did not serve its discovery document within 60s (log: ${dir}/provider.log)"
    fi
    sleep 0.2
  done
  echo "oidc-provider: serving $(cat "${dir}/issuer")"
}

case "${1:-}" in
  build) build ;;
  inputs-hash) inputs_hash ;;
  start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; cmd_start "$2" ;;
  stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; stop_pidfile "$2/provider.pid" ;;
  env) [[ $# -eq 2 ]] || die "usage: $0 env DIR"; echo "ISSUER=$(cat "$2/issuer")"; echo "CA_FILE=$(cd "$2" && pwd)/ca.pem" ;;
  *) die "usage: $0 build | inputs-hash | start DIR | stop DIR | env DIR" ;;
esac
