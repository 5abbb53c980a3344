#!/usr/bin/env bash
# A private MariaDB server for tests and benchmarks: its own datadir, unix socket and loopback port, no
# grant tables (any user name works), nothing shared with a system server.
#
#   mariadb.sh start DIR        initialise DIR/data, start mariadbd, create database `falcon`,
#                               write the DSN to DIR/dsn (mysql://root@127.0.0.1:PORT/falcon)
#   mariadb.sh stop DIR         shut the server down (waits until it has exited)
#   mariadb.sh restart DIR      stop the server and start it again on the same datadir and port (same DSN):
#                               a database outage for the clients, with nothing lost
#   mariadb.sh sql DIR 'SQL'    run SQL through the server's socket and print the rows (tab-separated)
#
# Works as root (the server runs as root with --user=root). Exits non-zero with a message naming what
# is missing when the MariaDB server binaries are not installed.
set -euo pipefail

usage() { echo "usage: $0 start|stop|restart|sql DIR [SQL]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

find_bin() {
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    for d in /usr/sbin /usr/bin /usr/local/sbin /usr/local/bin; do
      if [ -x "$d/$name" ]; then echo "$d/$name"; return 0; fi
    done
  done
  echo "mariadb.sh: none of '$*' found; install Debian's mariadb-server and mariadb-client" \
       "(scripts/setup.sh does)" >&2
  return 1
}

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
free_port() {
  python3 "${HERE}/../support/free_port.py"  # below the ephemeral range (see there)
}

client() {
  "$(find_bin mariadb mysql)" --no-defaults --protocol=socket -S "$dir/sock" -u root "$@"
}

# Starts mariadbd on DIR/data and port $1; returns 0 once it answers, 1 if it exited during start (the
# caller looks at the log), exits when it did not become ready within 30 s.
launch() {
  local port=$1 mariadbd
  mariadbd=$(find_bin mariadbd mysqld)
  mkdir -p "$dir/tmp"
  "$mariadbd" --no-defaults --datadir="$dir/data" --socket="$dir/sock" --port="$port" \
    --bind-address=127.0.0.1 --user=root --skip-grant-tables --pid-file="$dir/pid" \
    --tmpdir="$dir/tmp" --log-error="$dir/error.log" --innodb-buffer-pool-size=${FALCON_MARIADB_BUFFER_POOL:-128M} \
    --innodb-log-file-size=32M --innodb-flush-log-at-trx-commit=2 --skip-log-bin \
    --max-connections=200 >"$dir/stdout.log" 2>&1 &
  server_pid=$!
  echo "$server_pid" >"$dir/server.pid"
  # Ready when the socket answers; at most 30 s.
  for _ in $(seq 1 300); do
    if client -e 'SELECT 1' >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
  if client -e 'SELECT 1' >/dev/null 2>&1; then return 0; fi
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  echo "mariadb.sh: mariadbd did not become ready within 30 s; see $dir/error.log:" >&2
  tail -20 "$dir/error.log" >&2
  exit 1
}

stop_server() {
  local pid=""
  [ -f "$dir/server.pid" ] && pid=$(cat "$dir/server.pid")
  [ -z "$pid" ] && [ -f "$dir/pid" ] && pid=$(cat "$dir/pid")
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "mariadb.sh: no server running for $dir" >&2
    return 0
  fi
  "$(find_bin mariadb-admin mysqladmin)" --no-defaults -S "$dir/sock" -u root shutdown >/dev/null 2>&1 \
    || kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "mariadb.sh: mariadbd (pid $pid) did not stop within 30 s; killing it" >&2
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/server.pid"
}

case "$cmd" in
  start)
    mariadbd=$(find_bin mariadbd mysqld)
    installdb=$(find_bin mariadb-install-db mysql_install_db)
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "mariadb.sh: a server is already running for $dir (pid $(cat "$dir/pid"))" >&2
      exit 1
    fi
    # mariadb-install-db takes seconds on a busy machine; initialise a pristine datadir once per server
    # version and copy it for each start.
    version=$("$mariadbd" --no-defaults --version | awk '{print $3}')
    template="${TMPDIR:-/tmp}/falcon-mariadb-template-$(id -u)-$version"
    if [ ! -d "$template" ]; then
      staging="$template.tmp.$$"
      rm -rf "$staging"
      mkdir -p "$staging"
      if ! "$installdb" --no-defaults --datadir="$staging" --user=root \
          --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1; then
        echo "mariadb.sh: mariadb-install-db failed; see $dir/install.log:" >&2
        tail -20 "$dir/install.log" >&2
        rm -rf "$staging"
        exit 1
      fi
      mv -T "$staging" "$template" 2>/dev/null || rm -rf "$staging"  # lost a race: use the winner's
    fi
    rm -rf "$dir/data"
    mkdir -p "$dir/tmp"
    cp -a "$template" "$dir/data"
    # A port can be taken between choosing and binding it; try a few.
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      if launch "$port"; then break; fi
      if [ "$attempt" = 5 ] || ! grep -q -i "address already in use\|Can't start server: Bind" "$dir/error.log"; then
        echo "mariadb.sh: mariadbd exited during start; see $dir/error.log:" >&2
        tail -20 "$dir/error.log" >&2
        exit 1
      fi
    done
    client -e 'CREATE DATABASE IF NOT EXISTS falcon CHARACTER SET utf8mb4 COLLATE utf8mb4_bin'
    echo "$port" >"$dir/port"
    echo "mysql://root@127.0.0.1:$port/falcon" >"$dir/dsn"
    echo "mariadb.sh: mariadbd (pid $server_pid) ready on 127.0.0.1:$port and $dir/sock; DSN in $dir/dsn" >&2
    ;;
  stop)
    stop_server
    ;;
  restart)
    [ -f "$dir/port" ] && [ -d "$dir/data" ] || { echo "mariadb.sh: no server was started for $dir (no $dir/port)" >&2; exit 1; }
    stop_server
    port=$(cat "$dir/port")
    # The port was just released; another process may take it in between, so try for a few seconds.
    for attempt in $(seq 1 20); do
      if launch "$port"; then break; fi
      if [ "$attempt" = 20 ]; then
        echo "mariadb.sh: mariadbd did not restart on port $port; see $dir/error.log:" >&2
        tail -20 "$dir/error.log" >&2
        exit 1
      fi
      sleep 0.5
    done
    echo "mariadb.sh: mariadbd (pid $server_pid) restarted on 127.0.0.1:$port" >&2
    ;;
  sql)
    [ $# -ge 3 ] || usage
    client --batch --skip-column-names -e "$3"
    ;;
  *)
    usage
    ;;
esac
