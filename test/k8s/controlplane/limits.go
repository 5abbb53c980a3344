package main

// What a node enforces with a network plugin and cgroups, for the crun containers of the test kubelet
// (--runtime=crun). The test machine has neither a Pod network nor delegated cgroup controllers, so:
//
//   - Network: a Pod that a NetworkPolicy of its namespace selects for Egress gets a network namespace of its
//     own, shared by its containers, with only a loopback interface. That denies everything, including what
//     the policy allows (DNS, the object store): there is no Pod network to allow it on. Such Pods must not
//     need the network (a file:// object store); Pods no policy isolates keep the host's network.
//   - Pids (the kubelet's --pod-max-pids, a pids cgroup on a node): the watcher kills a container whose PID
//     namespace holds that many tasks (its status says PidLimitReached), and every container gets
//     RLIMIT_NPROC at twice the limit, a bound the kernel enforces at once, between two rounds of the
//     watcher. That one is per user: the containers of one uid share it until the watcher kills the one at
//     its limit.
//   - emptyDir sizeLimit: the watcher measures each limited emptyDir and evicts the Pod that exceeds one,
//     as the kubelet's eviction manager does (phase Failed, reason Evicted, the kubelet's message); each
//     container also gets RLIMIT_FSIZE at the largest limit of the emptyDirs it writes, so that no file
//     outgrows its volume between two measurements.
//   - CPU and memory limits are not enforced (a node's cgroups would); activeDeadlineSeconds is.

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// watchInterval: how often the watcher measures pids and emptyDirs.
const watchInterval = 500 * time.Millisecond

// egressPolicy names a NetworkPolicy of the Pod's namespace that selects it for Egress ("" if none). A
// list that fails isolates the Pod (closed, with the error logged).
func (k *kubelet) egressPolicy(ctx context.Context, p *corev1.Pod) string {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := k.client.NetworkingV1().NetworkPolicies(p.Namespace).List(lctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: NetworkPolicies of %s (isolating %s): %v\n", p.Namespace, p.Name, err)
		return "(unknown: the list failed)"
	}
	for _, np := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		for _, t := range np.Spec.PolicyTypes {
			if t == networkingv1.PolicyTypeEgress {
				return np.Name
			}
		}
	}
	return ""
}

// podNetwork makes the Pod's network namespace when a policy isolates it: a file under podDir that the
// containers' OCI configs name. The returned function removes it.
func (r *containerRuntime) podNetwork(ctx context.Context, k *kubelet, p *corev1.Pod, podDir string) (func(), error) {
	policy := k.egressPolicy(ctx, p)
	if policy == "" {
		return func() {}, nil
	}
	path := filepath.Join(podDir, "netns")
	releaseNetns(path) // one left by a kubelet that died
	if err := newNetns(path); err != nil {
		releaseNetns(path)
		return nil, fmt.Errorf("network namespace of the Pod (NetworkPolicy %s): %v", policy, err)
	}
	r.mu.Lock()
	r.netns[podDir] = path
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.netns, podDir)
		r.mu.Unlock()
		releaseNetns(path)
	}, nil
}

func (r *containerRuntime) netnsOf(podDir string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.netns[podDir]
}

// releaseAll removes every Pod network namespace (the kubelet is going away).
func (r *containerRuntime) releaseAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for d, path := range r.netns {
		releaseNetns(path)
		delete(r.netns, d)
	}
}

// newNetns creates a network namespace with its loopback interface up and binds it at path.
func newNetns(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine instead of going back to the scheduler in
		// the new namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %v", err)
			return
		}
		if err := loopbackUp(); err != nil {
			errc <- fmt.Errorf("loopback up: %v", err)
			return
		}
		src := "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net"
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind %s at %s: %v", src, path, err)
			return
		}
		errc <- nil
	}()
	return <-errc
}

func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func releaseNetns(path string) {
	_ = unix.Unmount(path, unix.MNT_DETACH)
	_ = os.Remove(path)
}

// rlimits of a container: RLIMIT_NPROC at twice --pod-max-pids (see above), RLIMIT_FSIZE at the largest
// sizeLimit of the emptyDirs it mounts writable (none when one of them has no limit, or the root is writable).
func (k *kubelet) rlimits(p *corev1.Pod, c corev1.Container, readOnlyRoot bool) []map[string]interface{} {
	var out []map[string]interface{}
	if k.podMaxPids > 0 {
		out = append(out, map[string]interface{}{"type": "RLIMIT_NPROC", "hard": 2 * k.podMaxPids, "soft": 2 * k.podMaxPids})
	}
	limits := emptyDirLimits(p)
	largest, bounded := int64(0), readOnlyRoot
	for _, m := range c.VolumeMounts {
		if m.ReadOnly {
			continue
		}
		if !isEmptyDir(p, m.Name) {
			continue
		}
		l, ok := limits[m.Name]
		if !ok {
			bounded = false
			break
		}
		if l > largest {
			largest = l
		}
	}
	if bounded && largest > 0 {
		out = append(out, map[string]interface{}{"type": "RLIMIT_FSIZE", "hard": largest, "soft": largest})
	}
	return out
}

func isEmptyDir(p *corev1.Pod, volume string) bool {
	for _, v := range p.Spec.Volumes {
		if v.Name == volume && v.EmptyDir != nil {
			return true
		}
	}
	return false
}

// emptyDirLimits: the sizeLimit in bytes of each emptyDir that has one.
func emptyDirLimits(p *corev1.Pod) map[string]int64 {
	out := map[string]int64{}
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && !v.EmptyDir.SizeLimit.IsZero() {
			out[v.Name] = v.EmptyDir.SizeLimit.Value()
		}
	}
	return out
}

// diskUsage sums the allocated bytes of every file under dir (du's figure; links are not followed).
func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// watchLimits runs for the kubelet's life (crun mode): every watchInterval it evicts the Pods whose
// emptyDirs exceed their sizeLimit and kills the containers at their pid limit.
func (k *kubelet) watchLimits() {
	for range time.Tick(watchInterval) {
		k.mu.Lock()
		runs := make([]*podRun, 0, len(k.runs))
		for _, r := range k.runs {
			runs = append(runs, r)
		}
		k.mu.Unlock()
		var tasks map[uint64]int // tasks per PID namespace, counted once per round when needed
		for _, run := range runs {
			select {
			case <-run.done:
				continue
			default:
			}
			k.checkEmptyDirs(run)
			if k.podMaxPids > 0 {
				if tasks == nil {
					tasks = tasksPerPidNamespace()
				}
				k.checkPids(run, tasks)
			}
		}
	}
}

func (k *kubelet) checkEmptyDirs(run *podRun) {
	limits := emptyDirLimits(run.pod)
	for _, v := range run.pod.Spec.Volumes {
		l, ok := limits[v.Name]
		if !ok {
			continue
		}
		used := diskUsage(filepath.Join(run.podDir, "volumes", v.Name))
		if used <= l {
			continue
		}
		msg := fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, v.EmptyDir.SizeLimit.String())
		k.mu.Lock()
		first := run.evicted == ""
		if first {
			run.evicted = msg
		}
		cur := run.current
		k.mu.Unlock()
		if first {
			fmt.Fprintf(os.Stderr, "kubelet: evicting %s/%s: %s(%d bytes used)\n", run.pod.Namespace, run.pod.Name, msg, used)
			go stopProc(cur, 0) // the kubelet evicts for local storage without a grace period
		}
		return
	}
}

func (k *kubelet) checkPids(run *podRun, tasks map[uint64]int) {
	k.mu.Lock()
	procs := append(append([]*proc{}, run.inits...), run.current)
	k.mu.Unlock()
	for _, pr := range procs {
		if pr == nil || pr.ctr == nil {
			continue
		}
		select {
		case <-pr.done:
			continue
		default:
		}
		if pr.pidNS == 0 {
			pr.pidNS = pr.ctr.pidNamespace(pr.ctrID)
			if pr.pidNS == 0 {
				continue
			}
		}
		n := tasks[pr.pidNS]
		if int64(n) < k.podMaxPids {
			continue
		}
		k.mu.Lock()
		first := pr.killedFor == ""
		if first {
			pr.killedFor = fmt.Sprintf("the container reached the pid limit of %d tasks (the kubelet's --pod-max-pids) "+
				"and was killed", k.podMaxPids)
		}
		k.mu.Unlock()
		if first {
			fmt.Fprintf(os.Stderr, "kubelet: %s/%s container %s: %d tasks, at --pod-max-pids=%d: killed\n",
				run.pod.Namespace, run.pod.Name, pr.c.Name, n, k.podMaxPids)
			go pr.ctr.kill(pr.ctrID, "KILL")
		}
	}
}

// pidNamespace: the inode of the PID namespace of a running container's init (0 while unknown).
func (r *containerRuntime) pidNamespace(id string) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), crunTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.crun, "--root", r.stateDir, "state", id).Output()
	if err != nil {
		return 0
	}
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if json.Unmarshal(out, &st) != nil || st.Pid <= 0 || st.Status != "running" {
		return 0
	}
	return nsInode("/proc/" + strconv.Itoa(st.Pid) + "/ns/pid")
}

func nsInode(path string) uint64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

// tasksPerPidNamespace counts the tasks (threads, as a pids cgroup does) of every process by PID namespace.
func tasksPerPidNamespace() map[uint64]int {
	out := map[uint64]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		ino := nsInode("/proc/" + e.Name() + "/ns/pid")
		if ino == 0 {
			continue
		}
		n := 1
		if ts, err := os.ReadDir("/proc/" + e.Name() + "/task"); err == nil && len(ts) > 0 {
			n = len(ts)
		}
		out[ino] += n
	}
	return out
}
