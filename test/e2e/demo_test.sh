#!/usr/bin/env bash
# The README's main job (scripts/demo.sh) on the embedded defaults, with the full local sandbox, run twice
# from a copy of the build: as root, and as an ordinary user (uid/gid 65534, no capabilities). Each run uses
# the demo's default layout (a new 0700 folder from mktemp) and must finish with every offline analysis and
# the online script succeeded, the results downloaded and the cancel seen; and each Pod's isolation line
# must name the sandbox (bwrap, never uid 0).
#
#   test/e2e/demo_test.sh BUILD_DIR
#
# Runs a few services on free loopback ports and stops them (the demo's own cleanup); everything is under
# one temp folder, removed at the end unless KEEP=1.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?usage: demo_test.sh BUILD_DIR}" && pwd)
USER_ID=65534

T=$(mktemp -d /tmp/falcon-demo-test.XXXXXX)
cleanup() { if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi; }
trap cleanup EXIT
chmod 0755 "$T"

# A copy any user can read and run: the binaries and plugins , its catalog (FALCON_PREBUILT) and the demo's scripts.
mkdir -p "$T/prefix" "$T/src"
cp -r "$BUILD/bin" "$BUILD/plugins" "$BUILD/etc" "$T/prefix/"
cp -r "$SRC/scripts" "$T/src/"
chmod -R a+rX "$T/prefix" "$T/src"

fail() { echo "demo_test: $*" >&2; exit 1; }

# check NAME OUTPUT_FILE TMPDIR: what every demo run must show.
check() {
  local name=$1 out=$2 tmp=$3
  grep -q "offline analyses: \([0-9]*\) of \1 artifacts created, \1 finished, 0 failed" "$out" \
    || fail "$name: the offline analyses did not all succeed (output: $out)"
  grep -q "^analysis [0-9a-f-]*: succeeded after" "$out" || fail "$name: the online analysis did not succeed (output: $out)"
  grep -q "^line-counts.jsonl " "$out" || fail "$name: the online analysis' results are not listed (output: $out)"
  grep -q "^Status: *cancelled" "$out" || fail "$name: the cancelled analysis is not shown cancelled (output: $out)"
  local d
  d=$(find "$tmp" -maxdepth 1 -name 'falcon-demo.*' -type d | head -1)
  [ -n "$d" ] || fail "$name: no demo folder under $tmp"
  [ "$(stat -c %a "$d")" = 700 ] || fail "$name: the demo folder $d is not the default 0700 layout"
  ls "$d/results/"*/line-counts.jsonl >/dev/null || fail "$name: nothing downloaded under $d/results"
  # Every Pod ran in the sandbox, never as root (the isolation line of falcon-localpod get).
  local pods n=0 p iso
  pods=$("$T/prefix/bin/falcon-localpod" --state-dir="$d/state" list 2>/dev/null | awk 'NR > 1 { print $1 }')
  for p in $pods; do
    iso=$("$T/prefix/bin/falcon-localpod" --state-dir="$d/state" get "$p" 2>&1 | grep -i '^ *isolation' || true)
    echo "  $name: pod $p: ${iso:-<no isolation line>}"
    case "$iso" in
      *"sandbox: bwrap, uid 0,"*) fail "$name: pod $p ran as root: $iso" ;;
      *"sandbox: bwrap, uid "*) ;;
      *) fail "$name: pod $p did not run in the full sandbox: ${iso:-no isolation line}" ;;
    esac
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || fail "$name: no local Pods listed in $d/state"
  echo "demo_test: $name: passed ($n Pods, all sandboxed)"
}

if [ "$(id -u)" -ne 0 ]; then
  # Not root: the one run this user can make (as itself).
  echo "demo_test: as uid $(id -u) (not root: the root run and the uid $USER_ID run need root)"
  mkdir -p "$T/self-tmp"
  TMPDIR=$T/self-tmp FALCON_PREBUILT=$T/prefix bash "$T/src/scripts/demo.sh" >"$T/self.out" 2>&1 \
    || { tail -40 "$T/self.out"; fail "the demo failed (output above)"; }
  check "uid $(id -u)" "$T/self.out" "$T/self-tmp"
  exit 0
fi

echo "demo_test: as root"
mkdir -p "$T/root-tmp" "$T/root-home"
HOME=$T/root-home TMPDIR=$T/root-tmp FALCON_PREBUILT=$T/prefix \
  bash "$T/src/scripts/demo.sh" >"$T/root.out" 2>&1 || { tail -40 "$T/root.out"; fail "the demo as root failed (output above)"; }
check root "$T/root.out" "$T/root-tmp"

echo "demo_test: as uid $USER_ID"
mkdir -p "$T/user-tmp" "$T/user-home"
chown "$USER_ID:$USER_ID" "$T/user-tmp" "$T/user-home"
setpriv --reuid="$USER_ID" --regid="$USER_ID" --clear-groups --inh-caps=-all --bounding-set=-all \
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$T/user-home" TMPDIR="$T/user-tmp" FALCON_PREBUILT="$T/prefix" \
  bash "$T/src/scripts/demo.sh" >"$T/user.out" 2>&1 || { tail -40 "$T/user.out"; fail "the demo as uid $USER_ID failed (output above)"; }
check "uid $USER_ID" "$T/user.out" "$T/user-tmp"
