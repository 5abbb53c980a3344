#!/usr/bin/env python3
"""Measurement steps of bench/kube_bench.sh (stdlib only). Subcommands:

  submit HTTP_PORT N                         create Exp "bench", submit N online analyses (8 at a time)
  wait-created METRICS_PORT TARGET TIMEOUT T0
                                             wait until the controller's pods_created_total reaches TARGET;
                                             prints the seconds from T0 (epoch seconds) to the last Pod
  usage PID SECONDS                          the process's CPU (% of one core) and RSS over SECONDS
  pod-files KUBECONFIG_DIR NS TEMPLATE_POD OUT_DIR N
                                             N Pod bodies like TEMPLATE_POD (names bench-0..N-1) for curl
  curl-config KUBECONFIG_DIR NS FILES_DIR N OUT
                                             a curl -K file POSTing those N bodies to NS (curl --parallel)
  latency KUBECONFIG_DIR NS HTTP_PORT OBJECTS_DIR SAMPLES
                                             status write on a Pod -> the record's change seen through the
                                             API server; prints p50/p99 in ms
"""
import concurrent.futures as cf
import http.client
import json
import os
import ssl
import sys
import time
import urllib.request


def api_call(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read() or b"null")


class Kube:
    """A cluster-admin client of the test control plane (its client certificate from DIR/pki)."""

    def __init__(self, cp_dir):
        env = dict(line.strip().split("=", 1) for line in open(os.path.join(cp_dir, "env")) if "=" in line)
        self.port = int(env["APISERVER_PORT"])
        pki = os.path.join(cp_dir, "pki")
        self.ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
        self.conn = None

    def call(self, method, path, body=None, content_type="application/json"):
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
                self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                                  headers={"Content-Type": content_type})
                r = self.conn.getresponse()
                data = r.read()
                if r.status >= 300:
                    raise RuntimeError(f"{method} {path}: HTTP {r.status}: {data[:300]!r}")
                return json.loads(data)
            except (http.client.HTTPException, ConnectionError):
                self.conn = None
                if attempt == 2:
                    raise


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def submit(port, n):
    api_call(port, "POST", "/v1/exps", {"exp_id": "bench", "name": "bench", "status": "completed"})
    body = {"exp_id": "bench", "analysis_type": "online", "command": "true"}
    t0 = time.time()
    with cf.ThreadPoolExecutor(8) as ex:
        ids = list(ex.map(lambda _: api_call(port, "POST", "/v1/analyses", body)["analysis_id"], range(n)))
    print(f"submitted {len(ids)} analyses in {time.time() - t0:.1f} s", file=sys.stderr)


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def wait_created(port, target, timeout, t0):
    last, seen = 0, -1.0
    while time.time() - t0 < timeout:
        try:
            n = metric(port, "falcon_controller_pods_created_total")
        except OSError:
            n = 0
        if n != seen:
            seen, last = n, time.time()
        if n >= target:
            print(f"{last - t0:.3f}")
            return
        time.sleep(0.05)
    sys.exit(f"only {seen:.0f} of {target} Pods created within {timeout} s")


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def rss_kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def usage(pid, seconds):
    hz = os.sysconf("SC_CLK_TCK")
    c0, t0 = cpu_ticks(pid), time.time()
    rss = []
    while time.time() - t0 < seconds:
        rss.append(rss_kib(pid))
        time.sleep(0.5)
    c1, t1 = cpu_ticks(pid), time.time()
    print(f"cpu={100.0 * (c1 - c0) / hz / (t1 - t0):.1f}% rss_mib={max(rss) / 1024:.0f} "
          f"peak_rss_mib={rss_kib(pid, 'VmHWM') / 1024:.0f}")


def pod_files(cp_dir, ns, template, out_dir, n):
    pod = Kube(cp_dir).call("GET", f"/api/v1/namespaces/{ns}/pods/{template}")
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": {"app": "kube-bench"}, "annotations": pod["metadata"].get("annotations", {})},
            "spec": pod["spec"]}
    for k in ("nodeName", "schedulerName", "tolerations", "priority", "enableServiceLinks",
              "preemptionPolicy", "dnsPolicy", "terminationGracePeriodSeconds"):
        body["spec"].pop(k, None)
    os.makedirs(out_dir, exist_ok=True)
    for i in range(n):
        body["metadata"]["name"] = f"bench-{i}"
        with open(os.path.join(out_dir, f"{i}.json"), "w") as f:
            json.dump(body, f)


def curl_config(cp_dir, ns, files_dir, n, out):
    """A curl config (-K) that POSTs files_dir/{i}.json to namespace ns, for one `curl --parallel` process."""
    kube = Kube(cp_dir)
    pki = os.path.join(cp_dir, "pki")
    with open(out, "w") as f:
        for i in range(n):
            if i:
                f.write("next\n")
            f.write(f'url = "https://127.0.0.1:{kube.port}/api/v1/namespaces/{ns}/pods"\n'
                    f'data-binary = "@{files_dir}/{i}.json"\n'
                    'header = "Content-Type: application/json"\n'
                    f'cacert = "{pki}/ca.crt"\ncert = "{pki}/admin.crt"\nkey = "{pki}/admin.key"\n'
                    'silent\noutput = "/dev/null"\nwrite-out = "%{http_code}\\n"\n')


def latency(cp_dir, ns, port, objects, samples):
    kube = Kube(cp_dir)
    recs = api_call(port, "GET", "/v1/analyses?exp_id=bench&page_size=1000")["analyses"]
    recs = [r for r in recs if r["status"] == "running"][:samples]
    if not recs:
        sys.exit("no running analyses to sample")
    lat = []
    for r in recs:
        aid = r["analysis_id"]
        # As if the runner had uploaded its log: the controller then records the outcome at once.
        d = os.path.join(objects, "analysis", "bench", aid)
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "output.log"), "w").close()
        name = "falcon-analysis-" + aid
        pod = kube.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        c = pod["spec"]["containers"][0]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        st = {"status": {"phase": "Succeeded", "containerStatuses": [{
            "name": c["name"], "image": c["image"], "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}}}]}}
        t0 = time.perf_counter()
        kube.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", st, "application/merge-patch+json")
        while True:
            if api_call(port, "GET", f"/v1/analyses/{aid}")["status"] == "succeeded":
                break
            if time.perf_counter() - t0 > 60:
                sys.exit(f"analysis {aid} not succeeded 60 s after its Pod's status write")
            time.sleep(0.002)
        lat.append((time.perf_counter() - t0) * 1000)
    print(f"samples={len(lat)} p50_ms={pct(lat, 50):.1f} p99_ms={pct(lat, 99):.1f} max_ms={max(lat):.1f}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "submit":
        submit(int(args[0]), int(args[1]))
    elif cmd == "wait-created":
        wait_created(int(args[0]), int(args[1]), float(args[2]), float(args[3]))
    elif cmd == "usage":
        usage(int(args[0]), float(args[1]))
    elif cmd == "pod-files":
        pod_files(args[0], args[1], args[2], args[3], int(args[4]))
    elif cmd == "curl-config":
        curl_config(args[0], args[1], args[2], int(args[3]), args[4])
    elif cmd == "latency":
        latency(args[0], args[1], int(args[2]), args[3], int(args[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
