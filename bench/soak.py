#!/usr/bin/env python3
"""The soak: a team's busy hour, with every fault the system promises to survive, on the real backends.

Starts MariaDB (test/mariadb/mariadb.sh), the GCS emulator (test/gcs/emulator.sh), falcon-apiserver and two
analyzer-controller replicas with leader election (on the local runtime, or on the test kube-apiserver with
--runtime=kubernetes), submits --analyses online analyses over --submit-seconds (every fourth a Python script,
each writes result.txt and echoes soak-begin-I / soak-end-I), and meanwhile injects, one after another with
--fault-gap seconds between them:

  controller-kill9        kill -9 one controller replica, start it again
  pods-deleted            delete three running analysis Pods (those analyses must end failed, not hang)
  apiserver-restart       SIGTERM falcon-apiserver (it drains), start it again
  leader-kill9            kill -9 the leader replica, start it again
  db-restart              restart MariaDB (same datadir and port)
  kube-apiserver-restart  (kubernetes) restart the kube-apiserver (same etcd)
  slow-clients            --slow-clients sockets trickle a request a byte at a time for --slow-seconds while
                          /healthz is timed (goal: p99 <= 50 ms) and four readers list analyses
  controllers-kill9       kill -9 both replicas at once, start them again
  object-store-outage     stop the GCS emulator for --outage seconds (uploads must be retried, not lost)
  apiserver-kill9         kill -9 falcon-apiserver, start it again
  pods-deleted            once more, late in the run

Then it waits up to --settle seconds for every analysis to end and checks that none was lost (accepted but
unknown), stuck (not terminal), duplicated (more than one Pod created for it), failed without being deleted by
the soak, or succeeded without its output.log, both markers in its log and its result.txt. It prints one
table of figures and exits 1 on any violation (the work dir with every log is then kept and named).
"""
import argparse
import concurrent.futures as cf
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from benchlib import free_port, logger, pct, proc_status_kib  # noqa: E402 (bench/ is on sys.path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERMINAL = {"succeeded", "failed", "cancelled"}


log = logger("soak")


def sh(*args, env=None, check=True, capture=False, timeout=300):
    r = subprocess.run(list(args), env=env, timeout=timeout, text=True,
                       stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r.stdout if capture else r


class Proc:
    """A server process with its log appended to one file across restarts."""

    def __init__(self, name, argv, logpath, env):
        self.name, self.argv, self.logpath, self.env = name, argv, logpath, env
        self.p = None
        self.peak_rss_kib = 0

    def start(self):
        f = open(self.logpath, "ab")
        f.write(f"\n===== soak: starting {self.name} at {time.strftime('%H:%M:%S')}\n".encode())
        f.flush()
        self.p = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT, env=self.env)
        f.close()

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def sample_rss(self):
        if self.alive():
            self.peak_rss_kib = max(self.peak_rss_kib, proc_status_kib(self.p.pid, "VmRSS") or 0)

    def kill(self, sig=signal.SIGKILL, wait=30):
        if not self.alive():
            return
        self.p.send_signal(sig)
        try:
            self.p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


class Http:
    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if data is not None else {}
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            return r.status, r.read(), dict(r.getheaders())
        finally:
            c.close()

    def json(self, method, path, body=None, timeout=10):
        status, data, _ = self.call(method, path, body, timeout)
        try:
            return status, json.loads(data) if data else {}
        except ValueError:
            return status, {"raw": data[:200].decode(errors="replace")}


def wait_until(pred, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except Exception as e:  # noqa: BLE001 - anything counts as "not yet"
            last = e
        time.sleep(interval)
    raise RuntimeError(f"{what}: not within {timeout} s (last error: {last})")


class Soak:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.join(a.build, "bin")
        self.work = tempfile.mkdtemp(prefix=f"falcon-soak-{a.runtime}-")
        self.env = dict(os.environ)
        self.procs = {}
        self.accepted = {}      # analysis_id -> index
        self.refused = []       # (index, last error)
        self.deleted_by_soak = set()
        self.faults = []        # (name, seconds, note)
        self.health_ms = []
        self.lock = threading.Lock()
        self.stop_sampling = threading.Event()

    # ---- services ----
    def start_services(self):
        a, w = self.a, self.work
        log(f"work dir {w}")
        sh("bash", f"{ROOT}/test/mariadb/mariadb.sh", "start", f"{w}/mariadb")
        dsn = open(f"{w}/mariadb/dsn").read().strip()
        sh("bash", f"{ROOT}/test/gcs/emulator.sh", "start", f"{w}/gcs")
        self.env["STORAGE_EMULATOR_HOST"] = "http://" + open(f"{w}/gcs/endpoint").read().strip()
        store = "gs://falcon-soak"
        self.http_port, self.grpc_port = free_port(), free_port()
        self.ctrl = [(free_port(), free_port()) for _ in range(2)]
        addrs = ",".join(f"127.0.0.1:{g}" for g, _ in self.ctrl)
        self.procs["apiserver"] = Proc("falcon-apiserver", [
            f"{self.bin}/falcon-apiserver", f"--db={dsn}", f"--http-listen=127.0.0.1:{self.http_port}",
            f"--grpc-listen=127.0.0.1:{self.grpc_port}", f"--controller-addr={addrs}",
            f"--object-store={store}", "--create-bucket", "--drain-seconds=5"], f"{w}/apiserver.log", self.env)
        self.procs["apiserver"].start()
        self.api = Http(self.http_port)
        wait_until(lambda: self.api.call("GET", "/readyz")[0] == 200, 60, "falcon-apiserver /readyz")

        common = ["--leader-elect", f"--online-concurrency={a.concurrency}", "--infra-retries=0",
                  "--finished-pod-retention=30", "--resync-interval=2", "--log-upload-interval=1",
                  f"--object-store={store}"]
        if a.runtime == "local":
            os.makedirs(f"{w}/state", mode=0o755)
            os.chmod(w, 0o755)
            extra = [f"--state-dir={w}/state", "--runtime=local", "--lease-duration=3"]
        else:
            extra = self.start_kube()
        for i, (g, h) in enumerate(self.ctrl):
            self.procs[f"controller{i}"] = Proc(f"controller{i}", [
                f"{self.bin}/analyzer-controller", f"--api-server=127.0.0.1:{self.grpc_port}",
                f"--grpc-listen=127.0.0.1:{g}", f"--http-listen=127.0.0.1:{h}", f"--identity=soak-c{i}"]
                + common + extra, f"{w}/controller{i}.log", self.env)
            self.procs[f"controller{i}"].start()
        wait_until(lambda: self.leader() is not None, 90, "a controller leader")
        status, body = self.api.json("POST", "/v1/exps", {"exp_id": "soak", "name": "soak", "status": "completed"})
        if status not in (201, 409):
            raise RuntimeError(f"creating Exp soak: {status} {body}")

    def start_kube(self):
        w = self.work
        kenv = dict(self.env, FALCON_KUBELET_PATH=self.bin)
        sh("bash", f"{ROOT}/test/k8s/control-plane.sh", "start", f"{w}/kube", env=kenv, timeout=300)
        kubectl = [f"{ROOT}/test/k8s/.bin/controlplane", "kubectl", f"--kubeconfig={w}/kube/kubeconfig"]
        self.kubectl = kubectl
        sh(*kubectl, "apply", "-f", f"{ROOT}/deploy/kubernetes/00-namespace.yaml",
           "-f", f"{ROOT}/deploy/kubernetes/10-rbac.yaml")
        token = sh(*kubectl, "create", "token", "analyzer-controller", "-n", "falcon", "--duration=24h",
                   capture=True).strip()
        port = re.search(r"APISERVER_PORT=(\d+)", open(f"{w}/kube/env").read()).group(1)
        with open(f"{w}/controller.kubeconfig", "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: soak
  cluster: {{server: "https://127.0.0.1:{port}", certificate-authority: "{w}/kube/pki/ca.crt"}}
users:
- name: analyzer-controller
  user: {{token: "{token}"}}
contexts:
- name: soak
  context: {{cluster: soak, user: analyzer-controller, namespace: falcon}}
current-context: soak
""")
        return ["--runtime=kubernetes", f"--kubeconfig={w}/controller.kubeconfig", "--namespace=falcon",
                "--analysis-image=falcon-analyzer:test", "--lease-duration=3", "--renew-deadline=2",
                "--retry-period=0.5"]

    def stop_services(self):
        self.stop_sampling.set()
        for p in self.procs.values():
            p.kill(signal.SIGTERM, wait=15)
        w = self.work
        if self.a.runtime == "kubernetes":
            sh("bash", f"{ROOT}/test/k8s/control-plane.sh", "stop", f"{w}/kube", check=False)
        sh("bash", f"{ROOT}/test/gcs/emulator.sh", "stop", f"{w}/gcs", check=False)
        sh("bash", f"{ROOT}/test/mariadb/mariadb.sh", "stop", f"{w}/mariadb", check=False)

    def leader(self):
        for i, (_, h) in enumerate(self.ctrl):
            if not self.procs[f"controller{i}"].alive():
                continue
            try:
                if Http(h).call("GET", "/readyz", timeout=2)[0] == 200:
                    return i
            except OSError:
                pass
        return None

    def sampler(self):
        while not self.stop_sampling.wait(1):
            for p in self.procs.values():
                p.sample_rss()

    # ---- submissions ----
    def submit(self, i):
        aid = str(uuid.uuid4())
        body = {"exp_id": "soak", "analysis_id": aid, "name": f"soak-{i}"}
        pause = random.uniform(1, 6)
        if i % 4 == 3:
            body["script_name"] = "soak.py"
            body["script_content"] = (
                "import os, time\n"
                f"print('soak-begin-{i}', flush=True)\n"
                f"time.sleep({pause:.1f})\n"
                "open(os.path.join(os.environ['FALCON_OUTPUT_DIR'], 'result.txt'), 'w').write('ok\\n')\n"
                f"print('soak-end-{i}', flush=True)\n")
            body["command"] = "python3 soak.py"
        else:
            body["command"] = (f"echo soak-begin-{i}; sleep {pause:.1f}; echo ok > \"$FALCON_OUTPUT_DIR/result.txt\";"
                               f" echo soak-end-{i}")
        deadline = time.monotonic() + 180
        last = None
        backoff = 0.2
        while time.monotonic() < deadline:
            try:
                status, resp = self.api.json("POST", "/v1/analyses", body, timeout=15)
                if status in (201, 409):
                    with self.lock:
                        self.accepted[aid] = i
                    return
                last = f"{status} {resp}"
                if status < 500 and status != 429:
                    break  # a refusal that a retry will not change
            except OSError as e:
                last = repr(e)
            time.sleep(backoff + random.uniform(0, backoff))
            backoff = min(backoff * 2, 5)
        with self.lock:
            self.refused.append((i, last))

    def submitter(self):
        n, secs = self.a.analyses, self.a.submit_seconds
        with cf.ThreadPoolExecutor(16) as ex:
            t0 = time.monotonic()
            futs = []
            for i in range(n):
                due = t0 + secs * i / n
                time.sleep(max(0.0, due - time.monotonic()))
                futs.append(ex.submit(self.submit, i))
            for f in futs:
                f.result()

    def list_all(self):
        out, token = [], ""
        while True:
            q = "/v1/analyses?exp_id=soak&page_size=1000" + (f"&page_token={token}" if token else "")
            status, body = self.api.json("GET", q, timeout=30)
            if status != 200:
                raise RuntimeError(f"GET {q}: {status} {body}")
            out += body.get("analyses", [])
            token = body.get("next_page_token", "")
            if not token:
                return out

    # ---- faults ----
    def restart(self, name, sig=signal.SIGKILL, pause=1.0):
        self.procs[name].kill(sig)
        time.sleep(pause)
        self.procs[name].start()

    def wait_api(self):
        wait_until(lambda: self.api.call("GET", "/readyz", timeout=2)[0] == 200, 120, "falcon-apiserver back")

    def wait_leader(self):
        wait_until(lambda: self.leader() is not None, 120, "a leader after the fault")

    def running_pods(self):
        if self.a.runtime == "local":
            out = sh(f"{self.bin}/falcon-localpod", f"--state-dir={self.work}/state", "list", capture=True,
                     check=False) or ""
            return [l.split()[0] for l in out.splitlines()[1:] if "Running" in l]
        out = sh(*self.kubectl, "-n", "falcon", "get", "pods", "--field-selector=status.phase=Running",
                 "-o", "name", capture=True, check=False) or ""
        return [l.split("/", 1)[1] for l in out.splitlines() if "/" in l]

    def delete_pods(self, n=3):
        pods = [p for p in self.running_pods() if p.startswith("falcon-analysis-")][:n]
        for pod in pods:
            self.deleted_by_soak.add(pod[len("falcon-analysis-"):])
            if self.a.runtime == "local":
                sh(f"{self.bin}/falcon-localpod", f"--state-dir={self.work}/state", "delete", pod, "--grace=1",
                   check=False)
            else:
                sh(*self.kubectl, "-n", "falcon", "delete", "pod", pod, "--grace-period=1", "--wait=false",
                   check=False)
        return f"deleted {len(pods)} Pods"

    def slow_clients(self):
        a = self.a
        socks = []
        for _ in range(a.slow_clients):
            try:
                s = socket.create_connection(("127.0.0.1", self.http_port), timeout=5)
                s.sendall(b"GET /v1/analyses HTTP/1.1\r\n")
                socks.append(s)
            except OSError:
                pass
        opened = len(socks)
        closed_at = []  # seconds after the start at which the server dropped a trickling socket
        t_start = time.monotonic()
        stop = threading.Event()

        def trickle():
            while not stop.wait(0.5):
                for s in list(socks):
                    try:
                        s.sendall(b"X")
                    except OSError:
                        socks.remove(s)
                        s.close()
                        closed_at.append(time.monotonic() - t_start)

        def reader():
            while not stop.is_set():
                try:
                    self.api.call("GET", "/v1/analyses?exp_id=soak&page_size=50", timeout=10)
                except OSError:
                    time.sleep(0.1)

        ts = [threading.Thread(target=trickle)] + [threading.Thread(target=reader) for _ in range(4)]
        for t in ts:
            t.start()
        end = time.monotonic() + a.slow_seconds
        samples, errors = [], 0
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                status = self.api.call("GET", "/healthz", timeout=5)[0]
                if status != 200:
                    errors += 1
            except OSError:
                errors += 1
            samples.append((time.monotonic() - t0) * 1000)
            time.sleep(0.05)
        stop.set()
        for t in ts:
            t.join()
        for s in socks:
            s.close()
        self.health_ms = samples
        dropped = (f", {len(closed_at)} dropped by the server after {min(closed_at):.0f}-{max(closed_at):.0f} s"
                   " (its --http-read-timeout)" if closed_at else "")
        return f"{opened} trickling sockets{dropped}; {len(samples)} /healthz samples, {errors} errors"

    def fault_list(self):
        faults = [
            ("controller-kill9", lambda: (self.restart(random.choice(["controller0", "controller1"])),
                                          self.wait_leader(), "")[-1]),
            ("pods-deleted", self.delete_pods),
            ("apiserver-restart", lambda: (self.restart("apiserver", signal.SIGTERM), self.wait_api(), "")[-1]),
            ("leader-kill9", self.leader_kill),
            ("db-restart", lambda: (sh("bash", f"{ROOT}/test/mariadb/mariadb.sh", "restart",
                                       f"{self.work}/mariadb"), self.wait_api(), "")[-1]),
        ]
        if self.a.runtime == "kubernetes":
            faults.append(("kube-apiserver-restart", lambda: (sh(
                "bash", f"{ROOT}/test/k8s/control-plane.sh", "restart", f"{self.work}/kube",
                env=dict(self.env, FALCON_KUBELET_PATH=self.bin)), "")[-1]))
        faults += [
            ("slow-clients", self.slow_clients),
            ("controllers-kill9", self.controllers_kill),
            ("object-store-outage", self.outage),
            ("apiserver-kill9", lambda: (self.restart("apiserver"), self.wait_api(), "")[-1]),
            ("pods-deleted", self.delete_pods),
        ]
        return faults

    def leader_kill(self):
        i = self.leader()
        if i is None:
            return "no leader to kill"
        self.procs[f"controller{i}"].kill()
        # The standby must take over (after the lease expires) before the killed replica comes back: a
        # replica restarted at once under the same identity would simply renew its own lease.
        t0 = time.monotonic()
        wait_until(lambda: self.leader() == 1 - i, 120, f"controller{1 - i} taking over from controller{i}")
        took = time.monotonic() - t0
        self.procs[f"controller{i}"].start()
        return f"killed controller{i}; controller{1 - i} leader after {took:.1f} s"

    def controllers_kill(self):
        for i in range(2):
            self.procs[f"controller{i}"].kill()
        time.sleep(1)
        for i in range(2):
            self.procs[f"controller{i}"].start()
        self.wait_leader()
        return ""

    def outage(self):
        sh("bash", f"{ROOT}/test/gcs/emulator.sh", "stop", f"{self.work}/gcs")
        time.sleep(self.a.outage)
        sh("bash", f"{ROOT}/test/gcs/emulator.sh", "start", f"{self.work}/gcs")
        return f"{self.a.outage} s without the object store"

    def inject(self):
        for name, fn in self.fault_list():
            time.sleep(self.a.fault_gap)
            t0 = time.monotonic()
            log(f"fault: {name}")
            try:
                note = fn() or ""
            except Exception as e:  # noqa: BLE001 - a fault that could not be injected is itself a finding
                note = f"ERROR {e}"
            secs = time.monotonic() - t0
            self.faults.append((name, secs, note))
            log(f"fault: {name} done in {secs:.1f} s {note}")

    # ---- checks ----
    def settle(self):
        deadline = time.monotonic() + self.a.settle
        last_report = 0
        while True:
            recs = self.list_all()
            open_ = [r for r in recs if r.get("status") not in TERMINAL]
            if not open_ or time.monotonic() > deadline:
                return recs
            if time.monotonic() - last_report > 10:
                log(f"settling: {len(recs) - len(open_)} of {len(recs)} ended, {len(open_)} open")
                last_report = time.monotonic()
            time.sleep(2)

    def check(self, recs, settle_secs):
        by_id = {r["analysis_id"]: r for r in recs}
        lost = [aid for aid in self.accepted if aid not in by_id]
        stuck = [r for r in recs if r.get("status") not in TERMINAL]
        unexpected = [r for r in recs if r.get("status") in ("failed", "cancelled")
                      and r["analysis_id"] not in self.deleted_by_soak]
        creates = {}
        for i in range(2):
            try:
                text = open(f"{self.work}/controller{i}.log", errors="replace").read()
            except OSError:
                continue
            for m in re.finditer(r"created pod falcon-analysis-([0-9a-f-]{36})(?! \(recreated\))", text):
                creates[m.group(1)] = creates.get(m.group(1), 0) + 1
        dups = [k for k, v in creates.items() if v > 1 and k in self.accepted]
        succeeded = [r for r in recs if r.get("status") == "succeeded"]

        def outputs(r):
            aid, i = r["analysis_id"], self.accepted.get(r["analysis_id"], -1)
            problems = []
            status, body = self.api.json("GET", f"/v1/analyses/{aid}/results", timeout=30)
            names = {x.get("name") for x in body.get("results", [])} if status == 200 else set()
            for want in ("output.log", "result.txt"):
                if want not in names:
                    problems.append(f"no {want}")
            status, text, _ = self.api.call("GET", f"/v1/analyses/{aid}/logs", timeout=30)
            text = text.decode(errors="replace")
            for marker in (f"soak-begin-{i}", f"soak-end-{i}"):
                if marker not in text:
                    problems.append(f"log lacks {marker}")
            return aid, problems

        with cf.ThreadPoolExecutor(8) as ex:
            missing = [(aid, p) for aid, p in ex.map(outputs, succeeded) if p]
        return {"lost": lost, "stuck": stuck, "unexpected": unexpected, "dups": dups, "missing": missing,
                "succeeded": succeeded, "settle": settle_secs}

    def report(self, res, started):
        a = self.a
        h = sorted(self.health_ms)
        rows = [
            ("runtime", a.runtime),
            ("analyses submitted / accepted / refused", f"{a.analyses} / {len(self.accepted)} / {len(self.refused)}"),
            ("succeeded", len(res["succeeded"])),
            ("Pods deleted by the soak", len(self.deleted_by_soak)),
            ("lost (accepted, not in the store)", len(res["lost"])),
            ("stuck (not terminal after settling)", len(res["stuck"])),
            ("duplicated (more than one Pod created)", len(res["dups"])),
            ("failed or cancelled, not deleted by the soak", len(res["unexpected"])),
            ("succeeded without output.log, markers or result.txt", len(res["missing"])),
            ("settled in", f"{res['settle']:.0f} s (bound {a.settle} s)"),
            ("/healthz under slow clients p50 / p99 / max",
             f"{pct(h, 0.5):.1f} / {pct(h, 0.99):.1f} / {(h[-1] if h else float('nan')):.1f} ms (goal p99 <= 50 ms)"),
            ("whole run", f"{time.monotonic() - started:.0f} s"),
        ]
        for name, p in self.procs.items():
            rows.append((f"peak RSS {name}", f"{p.peak_rss_kib / 1024:.1f} MiB"))
        print("\n| soak figure | value |\n|---|---|")
        for k, v in rows:
            print(f"| {k} | {v} |")
        print("\n| fault | took | note |\n|---|---|---|")
        for name, secs, note in self.faults:
            print(f"| {name} | {secs:.1f} s | {note} |")
        bad = []
        for key, what in (("lost", "lost"), ("stuck", "stuck"), ("dups", "duplicated"),
                          ("unexpected", "failed unexpectedly"), ("missing", "without outputs")):
            if res[key]:
                items = res[key][:10]
                shown = [x if isinstance(x, str) else (x[0] if isinstance(x, tuple) else
                         f"{x['analysis_id']} ({x.get('status')}: {x.get('status_message', x.get('message', ''))})")
                         for x in items]
                if key == "missing":
                    shown = [f"{aid}: {', '.join(p)}" for aid, p in items]
                bad.append(f"{len(res[key])} {what}: " + "; ".join(shown))
        if self.refused:
            bad.append(f"{len(self.refused)} refused: " + "; ".join(f"#{i}: {e}" for i, e in self.refused[:5]))
        if h and pct(h, 0.99) > 50:
            bad.append(f"/healthz p99 {pct(h, 0.99):.1f} ms under slow clients is over the 50 ms goal")
        for name, secs, note in self.faults:
            if note.startswith("ERROR"):
                bad.append(f"fault {name} could not be injected: {note}")
        return bad

    def run(self):
        started = time.monotonic()
        try:
            self.start_services()
            threading.Thread(target=self.sampler, daemon=True).start()
            log(f"submitting {self.a.analyses} analyses over {self.a.submit_seconds} s, injecting faults")
            sub = threading.Thread(target=self.submitter)
            sub.start()
            self.inject()
            sub.join()
            log(f"all submitted ({len(self.accepted)} accepted); settling for up to {self.a.settle} s")
            t0 = time.monotonic()
            recs = self.settle()
            res = self.check(recs, time.monotonic() - t0)
            bad = self.report(res, started)
        except Exception as e:  # noqa: BLE001
            bad = [f"the soak itself failed: {e}"]
        finally:
            self.stop_services()
        if bad:
            print("\nSOAK FAILED:\n  " + "\n  ".join(bad))
            print(f"logs kept in {self.work} (apiserver.log, controller0.log, controller1.log, mariadb/, gcs/"
                  + (", kube/" if self.a.runtime == "kubernetes" else "") + ")")
            return 1
        print(f"\nsoak passed ({self.a.runtime})")
        shutil.rmtree(self.work, ignore_errors=True)
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build dir (its bin/)")
    ap.add_argument("--runtime", choices=["local", "kubernetes"], default="local")
    ap.add_argument("--analyses", type=int, default=1000)
    ap.add_argument("--submit-seconds", type=float, default=360)
    ap.add_argument("--concurrency", type=int, default=16, help="the controllers' --online-concurrency")
    ap.add_argument("--outage", type=float, default=60, help="seconds the object store is down")
    ap.add_argument("--slow-clients", type=int, default=64)
    ap.add_argument("--slow-seconds", type=float, default=20)
    ap.add_argument("--fault-gap", type=float, default=8, help="seconds between faults")
    ap.add_argument("--settle", type=float, default=600, help="seconds to wait for every analysis to end")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    random.seed(a.seed)
    a.build = os.path.abspath(a.build)
    for b in ("falcon-apiserver", "analyzer-controller", "falcon-runner", "falcon-localpod"):
        if not os.access(os.path.join(a.build, "bin", b), os.X_OK):
            sys.exit(f"soak: {a.build}/bin/{b} is missing: build first (ninja -C {a.build})")
    sys.exit(Soak(a).run())


if __name__ == "__main__":
    main()
