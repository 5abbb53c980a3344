#!/usr/bin/env bash
# One command to run the analyzer on the test control plane:
#
#   test/k8s/run-controller.sh DIR [BUILD_DIR] [extra analyzer-controller flags...]
#
# starts (or reuses) the test kube-apiserver for DIR (control-plane.sh; its fake kubelet runs the analysis
# Pods' falcon-runner from BUILD_DIR/bin), applies deploy/kubernetes/00-namespace.yaml and 10-rbac.yaml,
# starts falcon-apiserver (SQLite in DIR, objects in DIR/objects) in the background and runs
# analyzer-controller --runtime=kubernetes --namespace=falcon --leader-elect in the foreground as the
# controller's ServiceAccount (a token from the TokenRequest API, so only its Role applies). Ctrl-C stops
# the controller and the API server; `test/k8s/control-plane.sh stop DIR` stops the control plane.
#
# Ports: API server HTTP 8080 and gRPC 9090, controller gRPC 9091 and HTTP 9092 on 127.0.0.1 (env
# HTTP_PORT, API_GRPC_PORT, CONTROLLER_GRPC_PORT, CONTROLLER_HTTP_PORT). Try:
#   curl -XPOST localhost:8080/v1/exps -d '{"exp_id":"e1","name":"e1","status":"completed"}'
#   curl -XPOST localhost:8080/v1/analyses -d '{"exp_id":"e1","analysis_type":"online","command":"echo hi"}'
#   test/k8s/.bin/controlplane kubectl --kubeconfig DIR/kubeconfig -n falcon get pods
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: $0 DIR [BUILD_DIR] [analyzer-controller flags...]" >&2; exit 2; }
DIR="$1"; shift
BUILD="${ROOT}/build"
if [[ $# -ge 1 && "$1" != --* ]]; then BUILD="$1"; shift; fi
BUILD="$(cd "${BUILD}" && pwd)"
BIN="${BUILD}/bin"
for b in falcon-apiserver analyzer-controller falcon-runner; do
  [[ -x "${BIN}/${b}" ]] || { echo "missing ${BIN}/${b}: build first (ninja -C ${BUILD})" >&2; exit 1; }
done
mkdir -p "${DIR}"
DIR="$(cd "${DIR}" && pwd)"
HTTP_PORT=${HTTP_PORT:-8080}
API_GRPC_PORT=${API_GRPC_PORT:-9090}
CONTROLLER_GRPC_PORT=${CONTROLLER_GRPC_PORT:-9091}
CONTROLLER_HTTP_PORT=${CONTROLLER_HTTP_PORT:-9092}

if ! { [[ -f "${DIR}/apiserver.pid" ]] && kill -0 "$(cat "${DIR}/apiserver.pid")" 2>/dev/null; }; then
  FALCON_KUBELET_PATH="${BIN}" "${HERE}/control-plane.sh" start "${DIR}"
fi
kubectl() { "${HERE}/.bin/controlplane" kubectl --kubeconfig="${DIR}/kubeconfig" "$@"; }
kubectl apply -f "${ROOT}/deploy/kubernetes/00-namespace.yaml" -f "${ROOT}/deploy/kubernetes/10-rbac.yaml" >/dev/null
# shellcheck disable=SC1091
source "${DIR}/env"
TOKEN="$(kubectl create token analyzer-controller -n falcon --duration=24h)"
cat >"${DIR}/controller.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: falcon-test
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority: ${DIR}/pki/ca.crt
users:
- name: analyzer-controller
  user:
    token: ${TOKEN}
contexts:
- name: falcon-test
  context: {cluster: falcon-test, user: analyzer-controller, namespace: falcon}
current-context: falcon-test
EOF

mkdir -p "${DIR}/objects"
"${BIN}/falcon-apiserver" --db="sqlite://${DIR}/falcon.db" --http-listen="127.0.0.1:${HTTP_PORT}" \
  --grpc-listen="127.0.0.1:${API_GRPC_PORT}" --controller-addr="127.0.0.1:${CONTROLLER_GRPC_PORT}" \
  --object-store="file://${DIR}/objects" 2>>"${DIR}/falcon-apiserver.log" &
API_PID=$!
trap 'kill "${API_PID}" 2>/dev/null || true; wait "${API_PID}" 2>/dev/null || true' EXIT
echo "run-controller: falcon-apiserver on http://127.0.0.1:${HTTP_PORT} (log ${DIR}/falcon-apiserver.log);" \
  "controller in the foreground; Ctrl-C stops both" >&2
"${BIN}/analyzer-controller" --api-server="127.0.0.1:${API_GRPC_PORT}" \
  --grpc-listen="127.0.0.1:${CONTROLLER_GRPC_PORT}" --http-listen="127.0.0.1:${CONTROLLER_HTTP_PORT}" \
  --runtime=kubernetes --kubeconfig="${DIR}/controller.kubeconfig" --namespace=falcon \
  --analysis-image=falcon-analyzer:latest --object-store="file://${DIR}/objects" --leader-elect \
  --identity=dev-controller "$@" || true
