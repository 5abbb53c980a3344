# Shared by the image tests (scan_image.sh, run_analyses.sh); sourced with IMAGE set. Skips (exit 77) when
# the tools or the image are missing; otherwise makes a working container of IMAGE, mounted at $MNT and
# removed at exit, and defines ok/bad (counting FAILS) and run.
for t in buildah podman; do
  command -v "$t" >/dev/null || { echo "SKIP: $t is not installed (deploy/build-image.sh installs it)"; exit 77; }
done
podman() { command podman --log-level=error "$@"; }
podman image exists "$IMAGE" || { echo "SKIP: image $IMAGE not built (run deploy/build-image.sh)"; exit 77; }

FAILS=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }

CTR=$(buildah from --pull=never --quiet "$IMAGE") || { echo "FAIL cannot create a working container of $IMAGE"; exit 1; }
trap 'buildah umount "$CTR" >/dev/null 2>&1; buildah rm "$CTR" >/dev/null 2>&1' EXIT
MNT=$(buildah mount "$CTR") || { echo "FAIL cannot mount $IMAGE"; exit 1; }
# run CMD...: runs CMD in the image as its configured user, with its environment and working directory;
# prints its stdout and stderr and returns its status. The output goes through a file of the container, read
# from the mount: buildah run with chroot isolation now and then loses a command's stdout on its way out
# (seen with outputs of some tens of KB: 1 run in 20 printed nothing).
run() {
  local rc
  buildah run --isolation=chroot "$CTR" -- sh -c '"$@" >/tmp/.falcon-run.out 2>&1' sh "$@" </dev/null
  rc=$?
  cat "$MNT/tmp/.falcon-run.out" 2>/dev/null
  rm -f "$MNT/tmp/.falcon-run.out"
  return $rc
}
