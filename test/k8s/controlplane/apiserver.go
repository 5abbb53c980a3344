package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// runAPIServer starts an embedded single-member etcd on loopback, waits until it serves, then runs the
// upstream kube-apiserver command with the remaining arguments (and --etcd-servers pointing at it).
func runAPIServer(args []string) int {
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	etcdDir := fs.String("etcd-dir", "", "etcd data directory (kept across restarts)")
	clientPort := fs.Int("etcd-client-port", 0, "etcd client port on 127.0.0.1")
	peerPort := fs.Int("etcd-peer-port", 0, "etcd peer port on 127.0.0.1")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *etcdDir == "" || *clientPort == 0 || *peerPort == 0 {
		fmt.Fprintln(os.Stderr, "apiserver: --etcd-dir, --etcd-client-port and --etcd-peer-port are required")
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = "falcon-test"
	cfg.Dir = *etcdDir
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *clientPort)}
	pURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *peerPort)}
	cfg.ListenClientUrls = []url.URL{cURL}
	cfg.AdvertiseClientUrls = []url.URL{cURL}
	cfg.ListenPeerUrls = []url.URL{pURL}
	cfg.AdvertisePeerUrls = []url.URL{pURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Keep the compaction default of the apiserver (it compacts every 5 minutes through the API); a short
	// history here lets tests provoke "410 Gone" by compacting explicitly.
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "apiserver: cannot start embedded etcd in %s: %v\n", *etcdDir, err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "apiserver: embedded etcd not ready within 60s")
		e.Close()
		return 1
	}
	go func() {
		if err := <-e.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "apiserver: embedded etcd failed: %v\n", err)
			os.Exit(1)
		}
	}()

	cmd := app.NewAPIServerCommand()
	cmd.SetArgs(append([]string{"--etcd-servers=" + cURL.String()}, fs.Args()...))
	code := cli.Run(cmd)
	e.Close()
	return code
}
