package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

// runKubectl is the upstream kubectl, so that tests and docs can `kubectl apply --dry-run=server` against
// the test control plane without installing anything else.
func runKubectl(args []string) int {
	c := cmd.NewDefaultKubectlCommand()
	c.SetArgs(args)
	return cli.Run(c)
}
