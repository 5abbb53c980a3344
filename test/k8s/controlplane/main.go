// Command controlplane is the test control plane of the Falcon Data Analyzer: a real kube-apiserver (the
// upstream command, linked as a library) with an embedded etcd in one binary, plus a fake kubelet that
// runs the containers of Pods as local processes.
//
//	controlplane apiserver --etcd-dir=D --etcd-client-port=P --etcd-peer-port=Q -- <kube-apiserver flags>
//	controlplane kubectl ARGS...          (the upstream kubectl)
//	controlplane kubelet --kubeconfig=K --node-name=N --run-dir=D --port=P --tls-cert=C --tls-key=K [--path=DIRS]
//
// It is started and stopped by test/k8s/control-plane.sh; see docs/kubernetes.md.
package main

import (
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: controlplane apiserver|kubelet|kubectl [flags]  (see test/k8s/control-plane.sh)")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode := os.Args[1]
	args := os.Args[2:]
	switch mode {
	case "apiserver":
		os.Exit(runAPIServer(args))
	case "kubelet":
		os.Exit(runKubelet(args))
	case "kubectl":
		os.Exit(runKubectl(args))
	default:
		usage()
	}
}
