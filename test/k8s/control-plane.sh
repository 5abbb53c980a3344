#!/usr/bin/env bash
# The test control plane: a real kube-apiserver (k8s.io/kubernetes linked as a library) with an embedded
# etcd in one Go binary, plus a fake kubelet that runs Pods' commands as local processes.
#
#   test/k8s/control-plane.sh build              build (or reuse) test/k8s/.bin/controlplane
#   test/k8s/control-plane.sh inputs-hash        the hash of its Go sources (a CI cache key for .bin/)
#   test/k8s/control-plane.sh start DIR          start on free loopback ports; writes DIR/kubeconfig
#   test/k8s/control-plane.sh stop DIR           stop everything started for DIR
#   test/k8s/control-plane.sh restart DIR        restart only the apiserver (same ports, same etcd data)
#   test/k8s/control-plane.sh env DIR            print the ports and paths (shell assignments)
#
# Environment:
#   FALCON_KUBELET=0            do not start the fake kubelet (Pods stay Pending)
#   FALCON_KUBELET_PATH=DIRS    directories put first on PATH for Pod commands (e.g. build/bin)
#   FALCON_KUBELET_RUNTIME=crun run each container in an OCI container (crun) that honours its
#                               securityContext and volumes (controlplane/container.go); default: process
#   FALCON_KUBELET_IMAGE_BUNDLE=DIR  with crun: the image unpacked by umoci (default: the host's /usr, /etc)
#   FALCON_KUBELET_HOST_DIRS=D1,D2   with crun: host folders a container gets when its flags name them
#   FALCON_KUBELET_POD_MAX_PIDS=N    with crun: tasks a container may hold (default 1024)
#   GOMODCACHE / GOCACHE        the Go caches (the first build takes 10-20 minutes on 2 cores)
#
# DIR gets: kubeconfig (cluster-admin client certificate), pki/ (CA, serving, admin, service-account
# and kubelet keys), etcd/ (data), apiserver.log, kubelet.log, pods/ (per-Pod work dirs and logs), env.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN_DIR="${HERE}/.bin"
BIN="${BIN_DIR}/controlplane"
SRC="${HERE}/controlplane"

die() { echo "control-plane: $*" >&2; exit 1; }

# The binary is reused only when it was built from exactly these inputs (not by modification times: a
# cache restored by CI has fresh ones).
inputs_hash() {
  (cd "${SRC}" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 | sort -z |
    xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

build() {
  command -v go >/dev/null 2>&1 || die "the go command is needed to build the control plane (Go >= 1.25)"
  mkdir -p "${BIN_DIR}"
  # One build at a time (several test binaries may start control planes concurrently).
  exec 9>"${BIN_DIR}/.build.lock"
  flock 9
  local want
  want="$(inputs_hash)"
  if [[ -x "${BIN}" && "$(cat "${BIN}.inputs" 2>/dev/null || true)" == "${want}" ]]; then
    flock -u 9
    return 0
  fi
  echo "control-plane: building ${BIN} (the first build takes 10-20 minutes; later ones use the Go cache)" >&2
  (cd "${SRC}" && CGO_ENABLED=0 go build -p 2 -trimpath -ldflags="-s -w" -o "${BIN}.tmp" .) \
    || die "build failed (see the go output above)"
  mv "${BIN}.tmp" "${BIN}"
  echo "${want}" >"${BIN}.inputs"
  flock -u 9
}

free_port() {
  python3 "${HERE}/../support/free_port.py"  # below the ephemeral range (see there)
}

gen_certs() {
  local pki="$1"
  mkdir -p "${pki}"
  (
    cd "${pki}"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
      -subj "/CN=falcon-test-ca" 2>/dev/null
    # $1 name, $2 subject, $3 extensions
    sign() {
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 \
        -extfile "$1.ext" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    sign apiserver "/CN=kube-apiserver" \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
    sign admin "/O=system:masters/CN=falcon-test-admin" "extendedKeyUsage=clientAuth"
    sign kubelet "/CN=falcon-node" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
    sign kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "certificate generation with openssl failed"
}

b64() { base64 -w0 <"$1"; }

write_kubeconfig() {
  local dir="$1" port="$2"
  cat >"${dir}/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: falcon-test
  cluster:
    server: https://127.0.0.1:${port}
    certificate-authority-data: $(b64 "${dir}/pki/ca.crt")
users:
- name: falcon-test-admin
  user:
    client-certificate-data: $(b64 "${dir}/pki/admin.crt")
    client-key-data: $(b64 "${dir}/pki/admin.key")
contexts:
- name: falcon-test
  context:
    cluster: falcon-test
    user: falcon-test-admin
    namespace: default
current-context: falcon-test
EOF
  mv "${dir}/kubeconfig.tmp" "${dir}/kubeconfig"
}

start_apiserver() {
  local dir="$1"
  # shellcheck disable=SC1091
  source "${dir}/env"
  local pki="${dir}/pki"
  mkdir -p "${dir}/etcd" "${dir}/cert-dir"
  setsid "${BIN}" apiserver --etcd-dir="${dir}/etcd" --etcd-client-port="${ETCD_CLIENT_PORT}" \
    --etcd-peer-port="${ETCD_PEER_PORT}" -- \
    --cert-dir="${dir}/cert-dir" \
    --secure-port="${APISERVER_PORT}" --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --tls-cert-file="${pki}/apiserver.crt" --tls-private-key-file="${pki}/apiserver.key" \
    --client-ca-file="${pki}/ca.crt" \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
    --enable-admission-plugins=PodSecurity \
    --disable-admission-plugins=ServiceAccount \
    --authorization-mode=RBAC \
    --service-account-issuer="https://127.0.0.1:${APISERVER_PORT}/" \
    --service-account-key-file="${pki}/sa.pub" \
    --service-account-signing-key-file="${pki}/sa.key" \
    --kubelet-certificate-authority="${pki}/ca.crt" \
    --kubelet-client-certificate="${pki}/kubelet-client.crt" \
    --kubelet-client-key="${pki}/kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --endpoint-reconciler-type=none \
    --watch-cache-sizes=configmaps#0 \
    >>"${dir}/apiserver.log" 2>&1 </dev/null &
  echo $! >"${dir}/apiserver.pid"
  local deadline=$((SECONDS + 120))
  until curl -sf --max-time 2 --cacert "${pki}/ca.crt" --cert "${pki}/admin.crt" --key "${pki}/admin.key" \
      "https://127.0.0.1:${APISERVER_PORT}/readyz" >/dev/null 2>&1; do
    if ! kill -0 "$(cat "${dir}/apiserver.pid")" 2>/dev/null; then
      # A free port taken by another process between choosing and binding it: the caller picks new ones.
      if [[ "${2:-}" == retry-ports ]] && tail -5 "${dir}/apiserver.log" | grep -q "address already in use"; then
        return 75
      fi
      tail -30 "${dir}/apiserver.log" >&2
      die "kube-apiserver exited during startup (log: ${dir}/apiserver.log)"
    fi
    if ((SECONDS > deadline)); then
      tail -30 "${dir}/apiserver.log" >&2
      die "kube-apiserver not ready on port ${APISERVER_PORT} within 120s (log: ${dir}/apiserver.log)"
    fi
    sleep 0.3
  done
}

start_kubelet() {
  local dir="$1"
  # shellcheck disable=SC1091
  source "${dir}/env"
  setsid "${BIN}" kubelet --kubeconfig="${dir}/kubeconfig" --node-name=falcon-node --run-dir="${dir}" \
    --port="${KUBELET_PORT}" --tls-cert="${dir}/pki/kubelet.crt" --tls-key="${dir}/pki/kubelet.key" \
    --path="${FALCON_KUBELET_PATH:-}" --runtime="${FALCON_KUBELET_RUNTIME:-process}" \
    --image-bundle="${FALCON_KUBELET_IMAGE_BUNDLE:-}" --host-dirs="${FALCON_KUBELET_HOST_DIRS:-}" \
    --pod-max-pids="${FALCON_KUBELET_POD_MAX_PIDS:-1024}" \
    >>"${dir}/kubelet.log" 2>&1 </dev/null &
  echo $! >"${dir}/kubelet.pid"
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
    for _ in $(seq 1 50); do
      kill -0 "${pid}" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$f"
}

cmd_start() {
  local dir="$1"
  mkdir -p "${dir}"
  dir="$(cd "${dir}" && pwd)"
  [[ -f "${dir}/apiserver.pid" ]] && kill -0 "$(cat "${dir}/apiserver.pid")" 2>/dev/null \
    && die "a control plane is already running for ${dir}; stop it first"
  build
  [[ -f "${dir}/pki/ca.crt" ]] || gen_certs "${dir}/pki"
  local attempt rc
  for attempt in 1 2 3; do
    if [[ ! -f "${dir}/env" ]]; then
      cat >"${dir}/env" <<EOF
APISERVER_PORT=$(free_port)
ETCD_CLIENT_PORT=$(free_port)
ETCD_PEER_PORT=$(free_port)
KUBELET_PORT=$(free_port)
EOF
    fi
    rc=0
    start_apiserver "${dir}" "$([[ ${attempt} -lt 3 ]] && echo retry-ports)" || rc=$?
    [[ ${rc} -eq 0 ]] && break
    [[ ${rc} -eq 75 ]] || exit "${rc}"
    echo "control-plane: a chosen port was taken meanwhile (attempt ${attempt} of 3); choosing new ports" >&2
    rm -f "${dir}/env"
  done
  # shellcheck disable=SC1091
  source "${dir}/env"
  write_kubeconfig "${dir}" "${APISERVER_PORT}"
  if [[ "${FALCON_KUBELET:-1}" != "0" ]]; then
    start_kubelet "${dir}"
  fi
  echo "control-plane: kube-apiserver ready at https://127.0.0.1:${APISERVER_PORT}; kubeconfig: ${dir}/kubeconfig"
}

cmd_stop() {
  local dir="$1"
  [[ -d "${dir}" ]] || return 0
  stop_pidfile "${dir}/kubelet.pid"
  stop_pidfile "${dir}/apiserver.pid"
}

cmd_restart() {
  local dir="$1"
  [[ -f "${dir}/env" ]] || die "no control plane was started for ${dir}"
  dir="$(cd "${dir}" && pwd)"
  stop_pidfile "${dir}/apiserver.pid"
  start_apiserver "${dir}"
  echo "control-plane: kube-apiserver restarted"
}

case "${1:-}" in
  build) build ;;
  inputs-hash) inputs_hash ;;
  start) [[ $# -eq 2 ]] || die "usage: $0 start DIR"; cmd_start "$2" ;;
  stop) [[ $# -eq 2 ]] || die "usage: $0 stop DIR"; cmd_stop "$2" ;;
  restart) [[ $# -eq 2 ]] || die "usage: $0 restart DIR"; cmd_restart "$2" ;;
  env) [[ $# -eq 2 ]] || die "usage: $0 env DIR"; cat "$2/env"; echo "KUBECONFIG=$(cd "$2" && pwd)/kubeconfig" ;;
  *) die "usage: $0 build | inputs-hash | start DIR | stop DIR | restart DIR | env DIR" ;;
esac
