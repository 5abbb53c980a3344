package main

// The fake kubelet: there is no container runtime in the test control plane, so this loop plays the
// kubelet for one Node. It binds every unscheduled Pod to its Node and runs its containers as local
// processes the way the kubelet orders them: the init containers one after another, each to completion (a
// failure fails the Pod), the native sidecars (init containers with restartPolicy Always) started in their
// turn and kept running, then the first container; when it ends the sidecars get SIGTERM (SIGKILL after the
// grace period) in reverse order. Each process gets only the container's own env, PATH and the folders that
// stand for the emptyDir volumes it mounts (FALCON_WORK_DIR for /work, TMPDIR for /tmp; one folder per Pod,
// shared by its containers) — nothing of the kubelet's environment, no service-account token and no other
// volume. It reports Running and then Succeeded/Failed with the real exit codes (initContainerStatuses and
// containerStatuses) through the status subresource, enforces activeDeadlineSeconds (DeadlineExceeded),
// stops the processes when the Pod is deleted and then removes the Pod with grace period 0, and serves each
// container's log at the kubelet's /containerLogs endpoint so that `pods/{name}/log?container=` (with
// follow) works through the apiserver; a failed container's termination message is the end of its log
// under terminationMessagePolicy FallbackToLogsOnError, as the kubelet writes it. With --runtime=process
// (the default) security contexts are not enforced (the processes run as the kubelet's user, without
// filesystem isolation; the apiserver's PodSecurity admission checks them); with --runtime=crun each
// container runs in an OCI container that honours them (container.go).
//
// Pods annotated falcon.dev/fake-kubelet=ignore are left alone (tests that write the status themselves).

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const ignoreAnnotation = "falcon.dev/fake-kubelet"

type podRun struct {
	uid      types.UID
	pod      *corev1.Pod
	done     chan struct{} // closed when every container of the Pod has ended
	inits    []*proc       // init containers and sidecars, in order; guarded by kubelet.mu
	sidecars []*proc       // the native sidecars among them
	current  *proc         // the init container or main container running now
	main     *proc
	podDir   string
	deleted  bool
	deadline bool
	evicted  string // the eviction's message (limits.go), "" if not evicted
}

type kubelet struct {
	client   kubernetes.Interface
	node     string
	runDir   string
	path     string
	mu       sync.Mutex
	runs     map[types.UID]*podRun
	logPaths map[string]string        // ns/pod/container -> file
	logDone  map[string]chan struct{} // file -> closed when its container ended
	ctr      *containerRuntime        // --runtime=crun; nil: host processes
	// --pod-max-pids (crun): tasks a container may hold (limits.go); 0: no limit.
	podMaxPids int64
}

func runKubelet(args []string) int {
	fs := flag.NewFlagSet("kubelet", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of a cluster-admin")
	node := fs.String("node-name", "falcon-node", "name of the Node this kubelet plays")
	runDir := fs.String("run-dir", "", "directory for per-Pod work dirs and logs")
	port := fs.Int("port", 0, "HTTPS port of the log endpoint on 127.0.0.1")
	cert := fs.String("tls-cert", "", "serving certificate (signed by the apiserver's --kubelet-certificate-authority)")
	key := fs.String("tls-key", "", "serving key")
	path := fs.String("path", "", "directories prepended to PATH when running a container command")
	runtimeName := fs.String("runtime", "process", "process: containers run as host processes; crun: in OCI containers (container.go)")
	bundle := fs.String("image-bundle", "", "--runtime=crun: an image unpacked by umoci (config.json + rootfs/); default: the host's /usr and /etc")
	hostDirs := fs.String("host-dirs", "", "--runtime=crun: comma-separated host folders a container may get bound when its command line names a path under them")
	podMaxPids := fs.Int64("pod-max-pids", 1024, "--runtime=crun: tasks a container may hold before it is killed (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" || *runDir == "" || *port == 0 || *cert == "" || *key == "" {
		fmt.Fprintln(os.Stderr, "kubelet: --kubeconfig, --run-dir, --port, --tls-cert and --tls-key are required")
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
		return 1
	}
	cfg.QPS = 200
	cfg.Burst = 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
		return 1
	}
	k := &kubelet{client: client, node: *node, runDir: *runDir, path: *path,
		runs: map[types.UID]*podRun{}, logPaths: map[string]string{}, logDone: map[string]chan struct{}{},
		podMaxPids: *podMaxPids}
	switch *runtimeName {
	case "process":
	case "crun":
		if k.ctr, err = newContainerRuntime(*runDir, *bundle, *hostDirs, *path); err != nil {
			fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
			return 1
		}
		go k.watchLimits()
	default:
		fmt.Fprintf(os.Stderr, "kubelet: --runtime=%s: want process or crun\n", *runtimeName)
		return 2
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/containerLogs/", k.serveLogs)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	srv := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", *port), Handler: mux}
	go func() {
		if err := srv.ListenAndServeTLS(*cert, *key); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "kubelet: log endpoint: %v\n", err)
			os.Exit(1)
		}
	}()

	ctx := context.Background()
	if err := k.registerNode(ctx, *port); err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: cannot register node: %v\n", err)
		return 1
	}
	go k.heartbeat(ctx, *port)

	factory := informers.NewSharedInformerFactory(client, 30*time.Second)
	inf := factory.Core().V1().Pods().Informer()
	queue := make(chan *corev1.Pod, 4096)
	enqueue := func(obj interface{}) {
		if p, ok := obj.(*corev1.Pod); ok {
			queue <- p
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n interface{}) { enqueue(n) },
	})
	stop := make(chan struct{})
	factory.Start(stop)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		// Take the Pods' processes down with the kubelet (as if the node went away).
		k.mu.Lock()
		for _, r := range k.runs {
			for _, pr := range append(append([]*proc{}, r.inits...), r.main) {
				if pr == nil || pr.cmd == nil || pr.cmd.Process == nil {
					continue
				}
				// Only groups whose leader has not been reaped: once it has, its id may already belong
				// to an unrelated process group (ids are reused), which must not be killed.
				select {
				case <-pr.done:
				default:
					if pr.ctr != nil {
						pr.ctr.kill(pr.ctrID, "KILL") // the container is not in crun's process group
					}
					_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
				}
			}
		}
		k.mu.Unlock()
		if k.ctr != nil {
			k.ctr.releaseAll()
		}
		os.Exit(0)
	}()
	for p := range queue {
		k.sync(ctx, p)
	}
	return 0
}

func (k *kubelet) nodeObject(port int) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.node, Labels: map[string]string{"kubernetes.io/hostname": k.node}},
	}
}

func (k *kubelet) nodeStatus(n *corev1.Node, port int) {
	now := metav1.Now()
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	n.Status.Phase = corev1.NodeRunning
}

func (k *kubelet) registerNode(ctx context.Context, port int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := k.client.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n, err = k.client.CoreV1().Nodes().Create(ctx, k.nodeObject(port), metav1.CreateOptions{})
		}
		if err == nil {
			k.nodeStatus(n, port)
			_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (k *kubelet) heartbeat(ctx context.Context, port int) {
	for range time.Tick(20 * time.Second) {
		_ = k.registerNode(ctx, port)
	}
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func (k *kubelet) sync(ctx context.Context, p *corev1.Pod) {
	if p.Annotations[ignoreAnnotation] == "ignore" {
		return
	}
	if p.Spec.NodeName != "" && p.Spec.NodeName != k.node {
		return
	}
	k.mu.Lock()
	run := k.runs[p.UID]
	k.mu.Unlock()

	if p.DeletionTimestamp != nil {
		if run != nil {
			k.mu.Lock()
			run.deleted = true
			k.mu.Unlock()
			terminate(k, run, p.DeletionGracePeriodSeconds)
		}
		go func() {
			if run != nil {
				<-run.done
			}
			zero := int64(0)
			uid := p.UID
			err := k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
				GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				fmt.Fprintf(os.Stderr, "kubelet: delete %s/%s: %v\n", p.Namespace, p.Name, err)
			}
		}()
		return
	}
	if run != nil || isTerminal(p) {
		return
	}
	if p.Spec.NodeName == "" {
		err := k.client.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: k.node},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "kubelet: bind %s/%s: %v\n", p.Namespace, p.Name, err)
		}
		return // the update event of the binding brings the Pod back
	}
	k.start(ctx, p)
}

// terminate stops the running container (the main one, or the init container in progress); runPod then
// stops the sidecars after it, as the kubelet does on deletion.
func terminate(k *kubelet, run *podRun, grace *int64) {
	g := int64(30)
	if grace != nil {
		g = *grace
	}
	k.mu.Lock()
	cur := run.current
	k.mu.Unlock()
	go stopProc(cur, g)
}

// proc is one container's process.
type proc struct {
	c         corev1.Container
	cmd       *exec.Cmd
	done      chan struct{}
	started   metav1.Time
	term      *corev1.ContainerStateTerminated
	ctr       *containerRuntime // set when the container runs under crun
	ctrID     string
	pidNS     uint64 // the inode of its PID namespace, once known (limits.go)
	killedFor string // why the kubelet killed it (limits.go), "" if it did not
}

// containerEnv is what a container runtime gives a container: the image's PATH (here the kubelet's, with
// --path first), the container's own env, and the emptyDir folders — nothing of the kubelet's environment.
func (k *kubelet) containerEnv(p *corev1.Pod, c corev1.Container, workDir, tmpDir string) []string {
	path := os.Getenv("PATH")
	if k.path != "" {
		path = k.path + ":" + path
	}
	env := []string{"PATH=" + path, "HOME=" + tmpDir}
	for _, name := range []string{"LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	// The emptyDir volumes at /work and /tmp become per-Pod folders shared by the Pod's containers that
	// mount them (later entries win). Nothing else is mounted: no service-account token, no Secret.
	for _, m := range c.VolumeMounts {
		switch m.MountPath {
		case "/work":
			env = append(env, "FALCON_WORK_DIR="+workDir)
		case "/tmp":
			env = append(env, "TMPDIR="+tmpDir)
		}
	}
	return append(env, "HOSTNAME="+p.Name)
}

// startProc starts one container's command+args with its log at podDir/<name>.log.
func (k *kubelet) startProc(p *corev1.Pod, c corev1.Container, podDir, workDir, tmpDir string) (*proc, error) {
	pr := &proc{c: c, done: make(chan struct{}), started: metav1.Now()}
	argv := append(append([]string{}, c.Command...), c.Args...)
	logPath := filepath.Join(podDir, c.Name+".log")
	k.mu.Lock()
	k.logPaths[p.Namespace+"/"+p.Name+"/"+c.Name] = logPath
	k.logDone[logPath] = pr.done
	k.mu.Unlock()
	logFile, err := os.Create(logPath)
	if err != nil {
		close(pr.done)
		return pr, err
	}
	if len(argv) == 0 {
		fmt.Fprintln(logFile, "fake kubelet: container has no command and no args (the fake kubelet does not know images)")
		logFile.Close()
		close(pr.done)
		return pr, errors.New("container has no command and no args (the fake kubelet does not know images)")
	}
	if k.ctr != nil {
		return k.startContainer(p, c, podDir, argv, pr, logFile)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// Resolve argv[0] with the prepended PATH.
	if k.path != "" && !strings.Contains(argv[0], "/") {
		for _, d := range strings.Split(k.path, ":") {
			if st, err := os.Stat(filepath.Join(d, argv[0])); err == nil && !st.IsDir() {
				cmd.Path = filepath.Join(d, argv[0])
				cmd.Err = nil // exec.Command's own lookup (in the kubelet's PATH) may have failed
				break
			}
		}
	}
	cmd.Env = k.containerEnv(p, c, workDir, tmpDir)
	cmd.Dir = workDir
	if c.WorkingDir != "" {
		if st, err := os.Stat(c.WorkingDir); err == nil && st.IsDir() {
			cmd.Dir = c.WorkingDir
		}
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pr.cmd = cmd
	return k.run(pr, logFile, nil)
}

// startContainer runs the container under crun (container.go). A container that cannot be configured
// (runAsNonRoot with uid 0, a volume kind the test kubelet does not run, ...) never starts: its status says
// CreateContainerConfigError with the reason.
func (k *kubelet) startContainer(p *corev1.Pod, c corev1.Container, podDir string, argv []string, pr *proc,
	logFile *os.File) (*proc, error) {
	cmd, id, err := k.ctr.prepare(context.Background(), k, p, c, podDir, argv)
	if err != nil {
		fmt.Fprintf(logFile, "fake kubelet: %v\n", err)
		logFile.Close()
		close(pr.done)
		if isConfigError(err) {
			return pr, err
		}
		return pr, fmt.Errorf("cannot prepare the container: %v", err)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr.cmd, pr.ctr, pr.ctrID = cmd, k.ctr, id
	return k.run(pr, logFile, func() { k.ctr.finish(id, podDir, c) })
}

// run starts pr.cmd and records its end (exit code, reason) in pr.term; `after` runs once it has ended.
func (k *kubelet) run(pr *proc, logFile *os.File, after func()) (*proc, error) {
	cmd := pr.cmd
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logFile, "fake kubelet: cannot start container: %v\n", err)
		logFile.Close()
		close(pr.done)
		return pr, err
	}
	go func() {
		err := cmd.Wait()
		if after != nil {
			after()
		}
		logFile.Close()
		code, reason, msg := int32(0), "Completed", ""
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int32(ws.Signal())
				} else {
					code = int32(ee.ExitCode())
				}
			} else {
				code = 128
			}
			reason = "Error"
		}
		if code != 0 && pr.c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			msg = logTail(logFile.Name())
		}
		k.mu.Lock()
		if pr.killedFor != "" {
			reason, msg = "PidLimitReached", pr.killedFor
		}
		pr.term = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, StartedAt: pr.started,
			FinishedAt: metav1.Now()}
		k.mu.Unlock()
		close(pr.done)
	}()
	return pr, nil
}

// logTail is what the kubelet puts in a failed container's termination message under
// terminationMessagePolicy FallbackToLogsOnError: the end of its log, at most 80 lines and 2048 bytes.
func logTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const maxBytes, maxLines = 2048, 80
	if st, err := f.Stat(); err == nil && st.Size() > maxBytes {
		_, _ = f.Seek(st.Size()-maxBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxBytes))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

func startFailure(pr *proc, err error) *corev1.ContainerStateTerminated {
	now := metav1.Now()
	reason := "StartError"
	if isConfigError(err) {
		reason = "CreateContainerConfigError"
	}
	return &corev1.ContainerStateTerminated{ExitCode: 128, Reason: reason, Message: err.Error(),
		StartedAt: pr.started, FinishedAt: now}
}

// start runs the Pod as the kubelet does: the init containers in order, each to completion (a failure
// fails the Pod); an init container with restartPolicy Always is a native sidecar, started in its turn
// and kept running; then the first container. When it ends, the sidecars are stopped (SIGTERM, then SIGKILL
// after the grace period) in reverse order, and the Pod's phase is the container's outcome.
func (k *kubelet) start(ctx context.Context, p *corev1.Pod) {
	if len(p.Spec.Containers) == 0 {
		return
	}
	c := p.Spec.Containers[0]
	podDir := filepath.Join(k.runDir, "pods", p.Namespace+"_"+p.Name+"_"+string(p.UID))
	workDir := filepath.Join(podDir, "work")
	tmpDir := filepath.Join(podDir, "tmp")
	if k.ctr == nil { // host processes; containers get their volumes instead (container.go)
		_ = os.MkdirAll(workDir, 0o755)
		_ = os.MkdirAll(tmpDir, 0o755)
	} else {
		_ = os.MkdirAll(podDir, 0o755)
	}
	run := &podRun{uid: p.UID, done: make(chan struct{}), pod: p, podDir: podDir}
	k.mu.Lock()
	k.runs[p.UID] = run
	k.mu.Unlock()
	go k.runPod(ctx, p, run, c, podDir, workDir, tmpDir)
}

func (k *kubelet) runPod(ctx context.Context, p *corev1.Pod, run *podRun, c corev1.Container, podDir, workDir, tmpDir string) {
	defer close(run.done)
	grace := int64(30)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	stopSidecars := func() {
		k.mu.Lock()
		sidecars := append([]*proc{}, run.sidecars...)
		g := grace
		if run.evicted != "" {
			g = 0 // as the eviction itself
		}
		k.mu.Unlock()
		for i := len(sidecars) - 1; i >= 0; i-- {
			stopProc(sidecars[i], g)
		}
	}
	if k.ctr != nil {
		release, err := k.ctr.podNetwork(ctx, k, p, podDir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubelet: %s/%s: %v\n", p.Namespace, p.Name, err)
			k.writeStatus(ctx, p, run, corev1.PodFailed, "FailedCreatePodSandBox", err.Error())
			return
		}
		defer release()
	}
	for _, ic := range p.Spec.InitContainers {
		if k.stopped(run) {
			stopSidecars()
			return
		}
		pr, err := k.startProc(p, ic, podDir, workDir, tmpDir)
		k.mu.Lock()
		if err != nil {
			pr.term = startFailure(pr, err)
		}
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			run.sidecars = append(run.sidecars, pr)
			run.inits = append(run.inits, pr)
			k.mu.Unlock()
			if err == nil {
				continue
			}
		} else {
			run.current = pr
			run.inits = append(run.inits, pr)
			k.mu.Unlock()
			<-pr.done
		}
		k.mu.Lock()
		term := pr.term
		k.mu.Unlock()
		if term != nil && term.ExitCode != 0 {
			stopSidecars()
			if !k.stopped(run) {
				reason, msg := k.evictedReason(run)
				k.writeStatus(ctx, p, run, corev1.PodFailed, reason, msg)
			}
			return
		}
	}
	if k.stopped(run) {
		stopSidecars()
		return
	}
	pr, err := k.startProc(p, c, podDir, workDir, tmpDir)
	k.mu.Lock()
	run.main = pr
	run.current = pr
	if err != nil {
		pr.term = startFailure(pr, err)
	}
	k.mu.Unlock()
	if err != nil {
		stopSidecars()
		k.writeStatus(ctx, p, run, corev1.PodFailed, "", "")
		return
	}
	k.writeStatus(ctx, p, run, corev1.PodRunning, "", "")

	if p.Spec.ActiveDeadlineSeconds != nil {
		d := time.Duration(*p.Spec.ActiveDeadlineSeconds) * time.Second
		go func() {
			select {
			case <-pr.done:
			case <-time.After(d):
				k.mu.Lock()
				run.deadline = true
				k.mu.Unlock()
				stopProc(pr, 2)
			}
		}()
	}
	<-pr.done
	stopSidecars()
	k.mu.Lock()
	deleted, deadline, term := run.deleted, run.deadline, pr.term
	k.mu.Unlock()
	if deleted {
		return
	}
	phase := corev1.PodSucceeded
	if term.ExitCode != 0 {
		phase = corev1.PodFailed
	}
	podReason, podMsg := k.evictedReason(run)
	if podReason != "" {
		phase = corev1.PodFailed
	} else if deadline {
		phase = corev1.PodFailed
		podReason = "DeadlineExceeded"
		podMsg = "Pod was active on the node longer than the specified deadline"
	}
	k.writeStatus(ctx, p, run, phase, podReason, podMsg)
}

// evictedReason: the Pod's reason and message when the kubelet evicted it (limits.go), else "".
func (k *kubelet) evictedReason(run *podRun) (string, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if run.evicted == "" {
		return "", ""
	}
	return "Evicted", run.evicted
}

func (k *kubelet) stopped(run *podRun) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return run.deleted
}

// stopProc sends SIGTERM to the process group, SIGKILL after `grace` seconds, and waits for the end.
func stopProc(pr *proc, grace int64) {
	if pr == nil || pr.cmd == nil || pr.cmd.Process == nil {
		return
	}
	select {
	case <-pr.done:
		return
	default:
	}
	_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-pr.done:
	case <-time.After(time.Duration(grace) * time.Second):
		if pr.ctr != nil {
			pr.ctr.kill(pr.ctrID, "KILL") // crun forwards TERM, but its container is not in its group
		}
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
		<-pr.done
	}
}

func containerStatus(pr *proc, p *corev1.Pod) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: pr.c.Name, Image: pr.c.Image, ImageID: "fake://" + pr.c.Image,
		ContainerID: "fake://" + string(p.UID) + "/" + pr.c.Name}
	if pr.term != nil {
		cs.State.Terminated = pr.term
	} else {
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: pr.started}
		cs.Ready = true
		t := true
		cs.Started = &t
	}
	return cs
}

// writeStatus replaces the Pod's status with the containers' states (re-reading on conflict).
// writeStatus posts the Pod's status, retrying like a real kubelet's status manager: a kube-apiserver that is
// restarting or unreachable must not lose a Pod's final phase (the Pod would then look Running forever). It
// gives up when the Pod is gone (or replaced by one of the same name), when ctx ends, or after
// statusRetryBound of failures, with a message.
const statusRetryBound = 5 * time.Minute

func (k *kubelet) writeStatus(ctx context.Context, orig *corev1.Pod, run *podRun, phase corev1.PodPhase, reason, msg string) {
	deadline := time.Now().Add(statusRetryBound)
	backoff := 100 * time.Millisecond
	pause := func(err error) bool {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "kubelet: status %s of %s/%s not written within %v: %v\n", phase, orig.Namespace,
				orig.Name, statusRetryBound, err)
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
		return true
	}
	for {
		p, err := k.client.CoreV1().Pods(orig.Namespace).Get(ctx, orig.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != orig.UID) {
			return
		}
		if err != nil {
			if !pause(err) {
				return
			}
			continue
		}
		now := metav1.Now()
		k.mu.Lock()
		var inits, mains []corev1.ContainerStatus
		for _, pr := range run.inits {
			inits = append(inits, containerStatus(pr, p))
		}
		started := now
		ready := corev1.ConditionFalse
		initialized := corev1.ConditionFalse
		if run.main != nil {
			initialized = corev1.ConditionTrue
			mains = append(mains, containerStatus(run.main, p))
			started = run.main.started
			if run.main.term == nil {
				ready = corev1.ConditionTrue
			}
		} else {
			for _, c := range p.Spec.Containers {
				mains = append(mains, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}})
			}
			if len(run.inits) > 0 {
				started = run.inits[0].started
			}
		}
		k.mu.Unlock()
		p.Status.Phase = phase
		p.Status.Reason = reason
		p.Status.Message = msg
		p.Status.HostIP = "127.0.0.1"
		p.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		p.Status.PodIP = "127.0.0.1"
		p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		p.Status.StartTime = &started
		p.Status.InitContainerStatuses = inits
		p.Status.ContainerStatuses = mains
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodInitialized, Status: initialized, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: now},
		}
		_, err = k.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if apierrors.IsConflict(err) && time.Now().Before(deadline) {
			continue // someone else wrote the Pod in between: read it again at once
		}
		fmt.Fprintf(os.Stderr, "kubelet: status of %s/%s: %v (retrying)\n", p.Namespace, p.Name, err)
		if !pause(err) {
			return
		}
	}
}

// serveLogs implements GET /containerLogs/{ns}/{pod}/{container}[?follow=true&tailLines=N&limitBytes=N].
func (k *kubelet) serveLogs(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 {
		http.Error(w, "want /containerLogs/{namespace}/{pod}/{container}", http.StatusBadRequest)
		return
	}
	key := strings.Join(parts, "/")
	k.mu.Lock()
	path, ok := k.logPaths[key]
	done := k.logDone[path]
	k.mu.Unlock()
	if !ok {
		http.Error(w, "container "+key+" is not running on this node", http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	follow := r.URL.Query().Get("follow") == "true"
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	rd := bufio.NewReader(f)
	buf := make([]byte, 32*1024)
	for {
		n, err := rd.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF {
			if !follow || done == nil {
				return
			}
			select {
			case <-done:
				// Drain what was written before the exit, then end.
				rest, _ := io.ReadAll(rd)
				w.Write(rest)
				return
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return
		}
	}
}
