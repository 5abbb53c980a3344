package main

// Containers for the fake kubelet (--runtime=crun): each container of a Pod runs under the OCI runtime crun
// (a Debian package) in its own mount, PID, IPC and UTS namespaces, as the user its securityContext names,
// with the capabilities, no_new_privs and seccomp filter it asks for, a read-only root filesystem when it
// says so, and only the volumes it mounts. The root filesystem is an image unpacked by `umoci unpack`
// (--image-bundle: its rootfs/ and the image's env, user and working dir from its config.json) or, without
// one, a stand-in made of the host's /usr and /etc (read-only) with --path's folders bound at
// /opt/falcon/<name> (the build's falcon-runner, and the plugins folder beside it). The network namespace
// is the host's, unless a NetworkPolicy isolates the Pod's egress: then the Pod gets one of its own with
// only a loopback interface (limits.go).
//
// Volumes: emptyDir (a per-Pod folder, mode 0777 like the kubelet's, shared by the containers that mount
// it), secret (the Secret's keys as files, read-only, mode defaultMode, group fsGroup); other kinds fail the
// container with a message. Host paths stand for the volume a deployment gives the store containers: a
// container gets a host file or folder under one of --host-dirs bound at its own path only when its own
// command line names it (`--object-store=file://DIR` read-write, any other path read-only).
//
// Limits: cgroup controllers may not be delegated to the test machine (crun runs with
// --cgroup-manager=disabled), so CPU and memory limits are not enforced; the pid limit and emptyDir
// sizeLimits are, by rlimits and a watcher (limits.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type containerRuntime struct {
	crun     string   // the crun binary
	stateDir string   // crun --root
	bundle   string   // umoci bundle (config.json + rootfs/), or "" for the host stand-in
	hostRoot string   // the stand-in root: mount points and merged-usr links only
	hostDirs []string // host folders whose paths a container's command line may name
	pathDirs []string // --path: bound read-only at /opt/falcon/<name> (host stand-in only)
	image    imageConfig
	mu       sync.Mutex
	netns    map[string]string // Pod folder -> its network namespace (limits.go), for isolated Pods
}

type imageConfig struct {
	Env  []string
	UID  int64
	GID  int64
	Cwd  string
	Root string // the rootfs
}

// errConfig marks what the kubelet reports as CreateContainerConfigError (the container never starts).
type errConfig struct{ msg string }

func (e errConfig) Error() string { return e.msg }

func newContainerRuntime(runDir, bundle, hostDirs, pathDirs string) (*containerRuntime, error) {
	crun, err := exec.LookPath("crun")
	if err != nil {
		return nil, fmt.Errorf("--runtime=crun: crun is not on PATH (apt-get install crun): %v", err)
	}
	r := &containerRuntime{crun: crun, stateDir: filepath.Join(runDir, "crun"), bundle: bundle,
		netns: map[string]string{}}
	for _, d := range strings.Split(hostDirs, ",") {
		if d != "" {
			r.hostDirs = append(r.hostDirs, filepath.Clean(d))
		}
	}
	for _, d := range strings.Split(pathDirs, ":") {
		if d != "" {
			r.pathDirs = append(r.pathDirs, filepath.Clean(d))
		}
	}
	if err := os.MkdirAll(r.stateDir, 0o700); err != nil {
		return nil, err
	}
	if bundle != "" {
		if err := r.readBundle(); err != nil {
			return nil, err
		}
	} else if err := r.makeHostRoot(runDir); err != nil {
		return nil, err
	}
	r.cleanStale()
	return r, nil
}

func (r *containerRuntime) readBundle() error {
	raw, err := os.ReadFile(filepath.Join(r.bundle, "config.json"))
	if err != nil {
		return fmt.Errorf("--image-bundle: %v (make it with: umoci unpack --image LAYOUT:TAG DIR)", err)
	}
	var cfg struct {
		Process struct {
			Env  []string `json:"env"`
			Cwd  string   `json:"cwd"`
			User struct {
				UID int64 `json:"uid"`
				GID int64 `json:"gid"`
			} `json:"user"`
		} `json:"process"`
		Root struct {
			Path string `json:"path"`
		} `json:"root"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("--image-bundle: %s/config.json: %v", r.bundle, err)
	}
	root := cfg.Root.Path
	if root == "" {
		root = "rootfs"
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(r.bundle, root)
	}
	r.image = imageConfig{Env: cfg.Process.Env, UID: cfg.Process.User.UID, GID: cfg.Process.User.GID,
		Cwd: cfg.Process.Cwd, Root: root}
	return nil
}

// makeHostRoot makes the stand-in root: empty mount points and the merged-usr links of a Debian root.
func (r *containerRuntime) makeHostRoot(runDir string) error {
	r.hostRoot = filepath.Join(runDir, "hostroot")
	for _, d := range []string{"usr", "etc", "proc", "dev", "sys", "tmp", "work", "run", "var/tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(r.hostRoot, d), 0o755); err != nil {
			return err
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		target, err := os.Readlink("/" + l)
		if err != nil {
			continue // not a merged-usr link on this host (or absent): bound as a folder below if present
		}
		dst := filepath.Join(r.hostRoot, l)
		if cur, err := os.Readlink(dst); err != nil || cur != target {
			_ = os.Remove(dst)
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		}
	}
	r.image = imageConfig{
		Env: []string{"PATH=" + strings.Join(append(r.pathInContainer(),
			"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"), ":")},
		UID: 0, GID: 0, Cwd: "/", Root: r.hostRoot}
	return nil
}

func (r *containerRuntime) pathInContainer() []string {
	var out []string
	for _, b := range r.pathBinds() {
		out = append(out, b[1])
	}
	return out
}

// cleanStale removes the containers a previous kubelet of this run dir left behind.
// crunCmd runs one crun management command (kill, delete), bounded by crunTimeout.
const crunTimeout = 10 * time.Second

func (r *containerRuntime) crunCmd(args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), crunTimeout)
	defer cancel()
	if err := exec.CommandContext(ctx, r.crun, append([]string{"--root", r.stateDir}, args...)...).Run(); err != nil &&
		ctx.Err() != nil {
		fmt.Fprintf(os.Stderr, "kubelet: crun %s did not end within %v\n", strings.Join(args, " "), crunTimeout)
	}
}

func (r *containerRuntime) cleanStale() {
	entries, err := os.ReadDir(r.stateDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		r.crunCmd("delete", "--force", e.Name())
	}
}

// pathBinds: --path's folders (and the plugins folder beside each) at /opt/falcon/<name> in the host
// stand-in, so that falcon-runner finds its plugins beside itself as in the image.
func (r *containerRuntime) pathBinds() [][2]string {
	if r.bundle != "" {
		return nil
	}
	var out [][2]string
	seen := map[string]bool{}
	for _, d := range r.pathDirs {
		for _, src := range []string{d, filepath.Join(filepath.Dir(d), "plugins")} {
			dst := "/opt/falcon/" + filepath.Base(src)
			if st, err := os.Stat(src); err != nil || !st.IsDir() || seen[dst] {
				continue
			}
			seen[dst] = true
			out = append(out, [2]string{src, dst})
		}
	}
	return out
}

func containerID(p *corev1.Pod, c corev1.Container) string { return string(p.UID) + "-" + c.Name }

// kill sends sig to the container's processes (crun kill); KILL reaches them even when the container's
// init ignores it.
func (r *containerRuntime) kill(id string, sig string) {
	r.crunCmd("kill", id, sig)
}

func (r *containerRuntime) remove(id string) {
	r.crunCmd("delete", "--force", id)
}

// securityOf merges the Pod's and the container's security contexts the way the kubelet does (the
// container's fields win).
type security struct {
	uid, gid     int64
	nonRoot      bool
	readOnlyRoot bool
	noNewPrivs   bool
	privileged   bool
	caps         []string
	seccomp      string // RuntimeDefault, Unconfined (Localhost is refused)
	fsGroup      *int64
	groups       []int64
}

// The capabilities a container runtime gives by default (containerd's list).
var defaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
	"CAP_AUDIT_WRITE"}

func (r *containerRuntime) securityOf(p *corev1.Pod, c corev1.Container) (security, error) {
	s := security{uid: r.image.UID, gid: r.image.GID, noNewPrivs: false, seccomp: "Unconfined"}
	if ps := p.Spec.SecurityContext; ps != nil {
		s.merge(ps.RunAsUser, ps.RunAsGroup, ps.RunAsNonRoot, ps.SeccompProfile)
		s.fsGroup = ps.FSGroup
		s.groups = append(s.groups, ps.SupplementalGroups...)
	}
	caps := append([]string{}, defaultCaps...)
	if cs := c.SecurityContext; cs != nil {
		s.merge(cs.RunAsUser, cs.RunAsGroup, cs.RunAsNonRoot, cs.SeccompProfile)
		if cs.ReadOnlyRootFilesystem != nil {
			s.readOnlyRoot = *cs.ReadOnlyRootFilesystem
		}
		if cs.AllowPrivilegeEscalation != nil {
			s.noNewPrivs = !*cs.AllowPrivilegeEscalation
		}
		if cs.Privileged != nil && *cs.Privileged {
			return s, errConfig{"privileged containers are not run by the test kubelet"}
		}
		if cs.Capabilities != nil {
			for _, d := range cs.Capabilities.Drop {
				if strings.EqualFold(string(d), "ALL") {
					caps = nil
					continue
				}
				caps = removeCap(caps, "CAP_"+strings.ToUpper(string(d)))
			}
			for _, a := range cs.Capabilities.Add {
				caps = append(removeCap(caps, "CAP_"+strings.ToUpper(string(a))), "CAP_"+strings.ToUpper(string(a)))
			}
		}
	}
	s.caps = caps
	if s.nonRoot && s.uid == 0 {
		return s, errConfig{"container has runAsNonRoot and image will run as root (pod: \"" + p.Name +
			"\", container: " + c.Name + ")"}
	}
	if s.seccomp == string(corev1.SeccompProfileTypeLocalhost) {
		return s, errConfig{"seccomp profile type Localhost is not supported by the test kubelet"}
	}
	return s, nil
}

// merge applies the fields a Pod's and a container's security contexts share (set ones win).
func (s *security) merge(user, group *int64, nonRoot *bool, sp *corev1.SeccompProfile) {
	if user != nil {
		s.uid = *user
	}
	if group != nil {
		s.gid = *group
	}
	if nonRoot != nil {
		s.nonRoot = *nonRoot
	}
	if sp != nil {
		s.seccomp = string(sp.Type)
	}
}

func removeCap(caps []string, c string) []string {
	out := caps[:0:0]
	for _, x := range caps {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

// The RuntimeDefault filter: what containerd's default profile refuses to an unprivileged container that
// matters here (mounts, namespaces, tracing, keyrings, BPF, perf, kernel modules, kexec, reboot, clock).
var seccompRefused = []string{"mount", "umount", "umount2", "pivot_root", "unshare", "setns", "ptrace", "keyctl",
	"add_key", "request_key", "bpf", "perf_event_open", "init_module", "finit_module", "delete_module", "kexec_load",
	"kexec_file_load", "reboot", "swapon", "swapoff", "open_by_handle_at", "name_to_handle_at", "userfaultfd",
	"iopl", "ioperm", "clock_settime", "clock_adjtime", "settimeofday", "adjtimex", "acct", "quotactl", "syslog",
	"lookup_dcookie", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree", "mount_setattr"}

// volumeSources resolves the Pod's volumes into host folders under podDir (emptyDir, secret).
func (k *kubelet) volumeSources(ctx context.Context, p *corev1.Pod, podDir string, fsGroup *int64) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range p.Spec.Volumes {
		dir := filepath.Join(podDir, "volumes", v.Name)
		switch {
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			_ = os.Chmod(dir, 0o777)
		case v.Secret != nil:
			if _, err := os.Stat(dir); err != nil {
				sec, err := k.client.CoreV1().Secrets(p.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
				if err != nil {
					if v.Secret.Optional != nil && *v.Secret.Optional {
						_ = os.MkdirAll(dir, 0o755)
						break
					}
					return nil, errConfig{fmt.Sprintf("secret %q not found: %v", v.Secret.SecretName, err)}
				}
				mode := os.FileMode(0o644)
				if v.Secret.DefaultMode != nil {
					mode = os.FileMode(*v.Secret.DefaultMode)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return nil, err
				}
				for key, val := range sec.Data {
					f := filepath.Join(dir, key)
					if err := os.WriteFile(f, val, mode); err != nil {
						return nil, err
					}
					_ = os.Chmod(f, mode)
					if fsGroup != nil {
						_ = os.Chown(f, 0, int(*fsGroup))
					}
				}
			}
		default:
			continue // refused below only if a container mounts it
		}
		out[v.Name] = dir
	}
	return out, nil
}

// hostBinds: the host paths under --host-dirs that the container's command line names.
func (r *containerRuntime) hostBinds(argv []string) []map[string]interface{} {
	var order []string
	rw := map[string]bool{} // a path named read-write anywhere is bound read-write
	for _, a := range argv {
		store := strings.HasPrefix(a, "--object-store=")
		v := a
		if i := strings.Index(v, "="); i >= 0 && strings.HasPrefix(v, "--") {
			v = v[i+1:]
		}
		if i := strings.Index(v, "file://"); i >= 0 {
			v = v[i+len("file://"):]
		}
		if !strings.HasPrefix(v, "/") {
			continue
		}
		v = filepath.Clean(v)
		under := false
		for _, d := range r.hostDirs {
			if v == d || strings.HasPrefix(v, d+"/") {
				under = true
			}
		}
		if !under {
			continue
		}
		if _, err := os.Stat(v); err != nil {
			continue
		}
		if _, ok := rw[v]; !ok {
			order = append(order, v)
		}
		rw[v] = rw[v] || store
	}
	// Parents first: a folder bound inside another bound folder must land on top of it.
	sort.SliceStable(order, func(i, j int) bool { return strings.Count(order[i], "/") < strings.Count(order[j], "/") })
	var binds []map[string]interface{}
	for _, v := range order {
		opts := []string{"rbind", "nosuid", "nodev"}
		if !rw[v] {
			opts = append(opts, "ro")
		}
		binds = append(binds, map[string]interface{}{"destination": v, "type": "bind", "source": v, "options": opts})
	}
	return binds
}

// prepare writes the container's OCI bundle (config.json) into bundleDir and returns the command that runs
// it in the foreground (crun forwards the signals it gets to the container; its exit status is the
// container's).
func (r *containerRuntime) prepare(ctx context.Context, k *kubelet, p *corev1.Pod, c corev1.Container, podDir string,
	argv []string) (*exec.Cmd, string, error) {
	sec, err := r.securityOf(p, c)
	if err != nil {
		return nil, "", err
	}
	vols, err := k.volumeSources(ctx, p, podDir, sec.fsGroup)
	if err != nil {
		return nil, "", err
	}
	id := containerID(p, c)
	bundleDir := filepath.Join(podDir, "containers", c.Name)
	if err := os.MkdirAll(bundleDir, 0o700); err != nil {
		return nil, "", err
	}
	root := r.image.Root
	if !sec.readOnlyRoot {
		// A writable root: an overlay of the image with a per-container upper folder.
		merged := filepath.Join(bundleDir, "rootfs")
		upper, work := filepath.Join(bundleDir, "upper"), filepath.Join(bundleDir, "overlay-work")
		for _, d := range []string{merged, upper, work} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, "", err
			}
		}
		_ = syscall.Unmount(merged, syscall.MNT_DETACH)
		if err := syscall.Mount("overlay", merged, "overlay", 0,
			"lowerdir="+root+",upperdir="+upper+",workdir="+work); err != nil {
			return nil, "", fmt.Errorf("writable root filesystem (overlay of %s): %v", root, err)
		}
		root = merged
	}

	mounts := []map[string]interface{}{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": []string{"nosuid", "noexec", "nodev"}},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
	}
	if r.bundle == "" {
		ro := []string{"rbind", "ro", "nosuid", "nodev"}
		mounts = append(mounts, map[string]interface{}{"destination": "/usr", "type": "bind", "source": "/usr", "options": ro},
			map[string]interface{}{"destination": "/etc", "type": "bind", "source": "/etc", "options": ro})
		for _, l := range []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
			if st, err := os.Lstat("/" + l); err == nil && st.IsDir() {
				mounts = append(mounts, map[string]interface{}{"destination": "/" + l, "type": "bind", "source": "/" + l, "options": ro})
			}
		}
	}
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, "", errConfig{fmt.Sprintf("volume %q of container %s: only emptyDir and secret volumes are run by the test kubelet", m.Name, c.Name)}
		}
		opts := []string{"rbind", "nosuid", "nodev"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		mounts = append(mounts, map[string]interface{}{"destination": m.MountPath, "type": "bind", "source": src, "options": opts})
	}
	// After the volumes (a folder bound inside /tmp or /work must not be hidden by its emptyDir).
	for _, b := range r.pathBinds() {
		mounts = append(mounts, map[string]interface{}{"destination": b[1], "type": "bind", "source": b[0],
			"options": []string{"rbind", "ro", "nosuid", "nodev"}})
	}
	mounts = append(mounts, r.hostBinds(argv)...)

	env := append([]string{}, r.image.Env...)
	env = append(env, "HOSTNAME="+p.Name)
	if !hasEnv(env, "HOME") {
		env = append(env, "HOME=/")
	}
	for _, e := range c.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	cwd := r.image.Cwd
	if c.WorkingDir != "" {
		cwd = c.WorkingDir
	}
	if cwd == "" {
		cwd = "/"
	}
	groups := append([]int64{}, sec.groups...)
	if sec.fsGroup != nil {
		groups = append(groups, *sec.fsGroup)
	}
	namespaces := []map[string]string{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}}
	if netns := r.netnsOf(podDir); netns != "" {
		namespaces = append(namespaces, map[string]string{"type": "network", "path": netns})
	}
	linux := map[string]interface{}{
		"namespaces": namespaces,
		"maskedPaths": []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
		"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
	}
	if sec.seccomp == string(corev1.SeccompProfileTypeRuntimeDefault) {
		linux["seccomp"] = map[string]interface{}{
			"defaultAction": "SCMP_ACT_ALLOW",
			"architectures": []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"},
			"syscalls":      []map[string]interface{}{{"names": seccompRefused, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}},
		}
	}
	spec := map[string]interface{}{
		"ociVersion": "1.0.2",
		"process": map[string]interface{}{
			"terminal": false,
			"user":     map[string]interface{}{"uid": sec.uid, "gid": sec.gid, "additionalGids": groups},
			"args":     argv,
			"env":      env,
			"cwd":      cwd,
			"capabilities": map[string]interface{}{"bounding": sec.caps, "effective": sec.caps,
				"permitted": sec.caps, "inheritable": []string{}, "ambient": []string{}},
			"noNewPrivileges": sec.noNewPrivs,
			"rlimits":         k.rlimits(p, c, sec.readOnlyRoot),
		},
		"root":     map[string]interface{}{"path": root, "readonly": sec.readOnlyRoot},
		"hostname": p.Name,
		"mounts":   mounts,
		"linux":    linux,
	}
	raw, err := json.MarshalIndent(spec, "", " ")
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(bundleDir, "config.json"), raw, 0o600); err != nil {
		return nil, "", err
	}
	r.remove(id) // a container of the same Pod and name left by a kubelet that died
	// crun refuses a hybrid cgroup layout (v1 controllers with a cgroup2 at /sys/fs/cgroup/unified) even
	// with --cgroup-manager=disabled; in a private mount namespace without that mount it sees plain v1.
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`umount /sys/fs/cgroup/unified 2>/dev/null; exec "$0" "$@"`,
		r.crun, "--root", r.stateDir, "--cgroup-manager=disabled", "run", "--bundle", bundleDir, id)
	return cmd, id, nil
}

// finish removes the container's state and its overlay (if any).
func (r *containerRuntime) finish(id, podDir string, c corev1.Container) {
	r.remove(id)
	_ = syscall.Unmount(filepath.Join(podDir, "containers", c.Name, "rootfs"), syscall.MNT_DETACH)
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

func isConfigError(err error) bool {
	var ce errConfig
	return errors.As(err, &ce)
}
