#!/usr/bin/env bash
# Runs analyses inside the image deploy/build-image.sh built, as an analysis Pod would: falcon-runner as
# the image's user (uid 65532) stages artifacts of testdata/ from a file:// object store in /work, runs the
# command and uploads its results.
#   - every plugin of deploy/plugins.yaml on the testdata artifact of its type (no error record);
#   - the demo's online Python analysis (scripts/demo.sh, count_ops.py) as `python3 count_ops.py`;
#   - every example of docs/analysis-examples/ (docs/analysis-environment.md) on the artifact it is for;
#   - a script that needs root fails cleanly (its own exit status, nothing uploaded but output.log).
# Exits 77 (skipped) when buildah/podman are missing or the image was not built.
# Usage: test/image/run_analyses.sh [IMAGE]   (default $FALCON_IMAGE_TAG or localhost/falcon-analyzer:dev)
set -uo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${1:-${FALCON_IMAGE_TAG:-localhost/falcon-analyzer:dev}}

# shellcheck source=test/image/image_lib.sh
source test/image/image_lib.sh
STORE=/work/store
ARTIFACTS=$STORE/exps/e1/artifacts
buildah copy --quiet --chown 65532:65532 "$CTR" testdata "$ARTIFACTS/" >/dev/null
buildah copy --quiet --chown 65532:65532 "$CTR" docs/analysis-examples "$STORE/scripts/" >/dev/null
# The demo's online analysis (scripts/demo.sh): the script the demo writes as count_ops.py.
DEMO_SCRIPT=$(mktemp)
trap 'buildah umount "$CTR" >/dev/null 2>&1; buildah rm "$CTR" >/dev/null 2>&1; rm -f "$DEMO_SCRIPT"' EXIT
sed -n "/^cat >\"\$D\/count_ops.py\" <<'PY'$/,/^PY$/p" scripts/demo.sh | sed '1d;$d' >"$DEMO_SCRIPT"
[ -s "$DEMO_SCRIPT" ] || bad "count_ops.py not found in scripts/demo.sh"
buildah copy --quiet --chown 65532:65532 "$CTR" "$DEMO_SCRIPT" "$STORE/scripts/count_ops.py" >/dev/null

# analysis ID INPUT COMMAND [SCRIPT]: runs falcon-runner (phase all) in the image; prints its log.
analysis() {
  local id=$1 input=$2 command=$3 script=${4:-}
  local args=(--object-store="file://$STORE" --exp-id=e1 --analysis-id="$id" --input="file://$STORE/$input"
              --command="$command" --work-dir="/work/run/$id")
  [ -n "$script" ] && args+=(--script-key="scripts/$script" --script-name="$script")
  run falcon-runner "${args[@]}" 2>&1
}
# result ID FILE: the content of a result the runner uploaded.
result() { cat "$MNT$STORE/analysis/e1/$1/$2" 2>/dev/null; }

# --- the plugins of the catalog --------------------------------------------------------------------------
input_for() {
  case "$1" in
    file) echo "exps/e1/artifacts/" ;;
    hlo) echo "exps/e1/artifacts/hlo/" ;;
    xplane) echo "exps/e1/artifacts/profile/jax_cpu.xplane.pb" ;;
    trace) echo "exps/e1/artifacts/profile/jax_cpu.trace.json.gz" ;;
  esac
}
# "name type command" per plugin of deploy/plugins.yaml (first artifact type).
while read -r name type command; do
  input=$(input_for "$type")
  [ -n "$input" ] || { bad "plugin $name: no testdata artifact of type $type"; continue; }
  log=$(analysis "p-$name" "$input" "$command")
  rc=$?
  out=$(result "p-$name" "$name.jsonl")
  records=$(printf '%s\n' "$out" | grep -c '"record_type"')
  errors=$(printf '%s\n' "$out" | grep -c '"record_type":"error"')
  if [ "$rc" -eq 0 ] && [ "$records" -gt 0 ] && [ "$errors" -eq 0 ]; then
    ok "plugin $name on $input: $records records"
  else
    bad "plugin $name on $input: exit $rc, $records records, $errors error records: $(echo "$log" | tail -3 | tr '\n' ' ')"
  fi
done < <(awk '/^  - name:/ { n = $3 } /artifact_types:/ { gsub(/[][,]/, " "); t = $2 } /command:/ { print n, t, $2 }' deploy/plugins.yaml)

# --- online Python analyses ------------------------------------------------------------------------------
# online ID INPUT SCRIPT RESULT: runs `python3 SCRIPT` on INPUT; RESULT must be uploaded and not empty.
online() {
  local id=$1 input=$2 script=$3 want=$4
  local log rc
  log=$(analysis "$id" "$input" "python3 $script" "$script")
  rc=$?
  if [ "$rc" -eq 0 ] && [ -n "$(result "$id" "$want")" ]; then
    ok "python3 $script on $input: $want ($(echo "$log" | grep -v '^\[falcon-runner\]' | tail -1))"
  else
    bad "python3 $script on $input: exit $rc: $(echo "$log" | tail -4 | tr '\n' ' ')"
  fi
}
online demo-online exps/e1/artifacts/ count_ops.py line-counts.jsonl
online ex-hlo exps/e1/artifacts/hlo/ hlo_opcodes.py hlo-opcodes.jsonl
online ex-xplane exps/e1/artifacts/profile/jax_cpu.xplane.pb xplane_ops.py xplane-ops.jsonl
online ex-trace exps/e1/artifacts/profile/jax_cpu.trace.json.gz trace_threads.py trace-ops.jsonl
# The plugins' JSONL results of the runs above, as an earlier analysis' results are given to a script.
online ex-jsonl analysis/e1/p-hlo-stats/ plugin_jsonl.py record-counts.jsonl

# --- a script that needs root ----------------------------------------------------------------------------
# A Python analysis that writes where only root may: the command's own exit status (1, PermissionError),
# no result but output.log, and the runner itself does not fail (not 3, 4 or 5).
log=$(analysis needs-root exps/e1/artifacts/hlo/ \
  "python3 -c \"open('/etc/falcon-test', 'w'); open('\$FALCON_OUTPUT_DIR/never', 'w')\"")
rc=$?
if [ "$rc" -eq 1 ] && echo "$log" | grep -q 'PermissionError' \
   && [ -z "$(result needs-root never)" ] && [ -n "$(result needs-root output.log)" ]; then
  ok "a script that needs root fails cleanly: exit $rc, $(echo "$log" | grep -m1 'PermissionError')"
else
  bad "a script that needs root: exit $rc: $(echo "$log" | tail -3 | tr '\n' ' ')"
fi

[ "$FAILS" -eq 0 ] && { echo "image analyses: all passed"; exit 0; }
echo "image analyses: $FAILS failed"
exit 1
