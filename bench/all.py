#!/usr/bin/env python3
"""Every benchmark of bench/ with its ceiling, in one run, as one table (bench/all.sh is the entry point).

Runs, one after another so that they do not share the cores:
  bench/apiserver_bench.sh   HTTP GET /v1/analyses/{id} vs GET /_hello; gRPC GetAnalysisRecord vs the
                             gRPC health service's Check (the no-op method of the same stack)
  bench/kube_bench.sh        Pods/min created by the controller vs a bare client (curl) on the test
                             kube-apiserver
  bench/controller_bench.sh  analyses/min end to end on the local runtime vs bare local Pods
  bench/plugins_bench.sh     the plugins vs the Python a user would write and XProf's converter
prints | path | ours | ceiling | ratio | goal | ok | with p50/p99 and peak RSS where the benchmark measures
them, writes every benchmark's own output next to it, and with --write-docs replaces the block between
the markers in docs/benchmarks.md with the table, the command and the machine.
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- bench/all.sh: begin (replaced by every run with --write-docs) -->"
END = "<!-- bench/all.sh: end -->"

QUICK = {
    "apiserver": {"RECORDS": "20000", "DURATION": "5"},
    "kube": {"N": "300", "SAMPLES": "50", "CPU_SECONDS": "10"},
    "controller": {"N": "300"},
    "plugins": {"SIZE_MB": "64", "BASE_MB": "32", "HLO_SIZE_MB": "16"},
}
FULL = {
    "apiserver": {},
    "kube": {"N": "1000"},
    "controller": {"N": "500"},
    "plugins": {},
}
SCRIPTS = {"apiserver": "apiserver_bench.sh", "kube": "kube_bench.sh", "controller": "controller_bench.sh",
           "plugins": "plugins_bench.sh"}


def run(name, build, env_extra, work, timeout):
    env = dict(os.environ, **env_extra)
    if name == "plugins":
        env.setdefault("WORK", os.path.join(build, "bench-plugins"))
    out_path = os.path.join(work, f"{name}.txt")
    cmd = ["bash", os.path.join(ROOT, "bench", SCRIPTS[name]), build]
    shown = " ".join(f"{k}={v}" for k, v in env_extra.items())
    print(f"==> {shown + ' ' if shown else ''}bench/{SCRIPTS[name]} (output: {out_path})", flush=True)
    t0 = time.monotonic()
    with open(out_path, "w") as f:
        try:
            rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = f"timed out after {timeout} s"
    text = open(out_path, errors="replace").read()
    print(f"    {'ok' if rc == 0 else 'FAILED (' + str(rc) + ')'} in {time.monotonic() - t0:.0f} s", flush=True)
    return rc, text, env


def num(pattern, text, group=1, cast=float):
    m = re.search(pattern, text, re.M)
    return cast(m.group(group)) if m else None


def wrk_row(label, text):
    m = re.search(re.escape(label) + r"\s+([\d.]+) req/s\s+p50 (\S+)\s+p99 (\S+)", text)
    return (float(m.group(1)), m.group(2), m.group(3)) if m else (None, "", "")


def rows_apiserver(text, env):
    hello = wrk_row("GET /_hello (ceiling)", text)
    get = wrk_row("GET /v1/analyses/{id}", text)
    rss = num(r"server peak RSS: ([\d.]+) MiB", text)
    rows = [("`GET /v1/analyses/{id}`", get[0], "req/s", f"p50 {get[1]}, p99 {get[2]}", hello[0],
             "`GET /_hello` on the same server", 0.7, f"{rss:.0f} MiB" if rss else "")]
    g = re.search(r"grpc GetAnalysisRecord: .*?([\d.]+) calls/s, p50 ([\d.]+) ms, p99 ([\d.]+) ms", text)
    h = re.search(r"grpc Health/Check: .*?([\d.]+) calls/s, p50 ([\d.]+) ms, p99 ([\d.]+) ms", text)
    rows.append(("gRPC `GetAnalysisRecord`", float(g.group(1)) if g else None, "calls/s",
                 f"p50 {g.group(2)} ms, p99 {g.group(3)} ms" if g else "", float(h.group(1)) if h else None,
                 "gRPC `grpc.health.v1.Health/Check` (no-op) on the same server", 0.7, ""))
    return rows


def rows_kube(text, env):
    ours = num(r"^controller: \d+ Pods in [\d.]+ s = (\d+) Pods/min", text)
    ceil = num(r"ratio controller / bare-client ceiling \((\d+) Pods/min\)", text)
    lat = re.search(r"p50_ms=([\d.]+) p99_ms=([\d.]+)", text)
    use = re.search(r"cpu=([\d.]+)% rss_mib=(\d+)", text)
    n = num(r"kube bench: N=(\d+)", text, cast=int)
    return [(f"Pod creation by the controller (test kube-apiserver, N={n})", ours, "Pods/min",
             f"watch→record p50 {lat.group(1)} ms, p99 {lat.group(2)} ms" if lat else "", ceil,
             "a bare client (curl) creating the same Pods", 0.8,
             f"{use.group(2)} MiB, {use.group(1)}% CPU tracking N live Pods" if use else "")]


def rows_controller(text, env):
    ours = num(r"end-to-end: (\d+) analyses/minute", text)
    ceil = num(r"pods_per_minute=(\d+)", text)
    lat = re.search(r"create -> RUNNING: p50 ([\d.]+) s, p99 ([\d.]+) s", text)
    rss = num(r"peak RSS ([\d.]+) MiB", text)
    n = num(r"controller bench: N=(\d+)", text, cast=int)
    return [(f"analyses/min on the local runtime (N={n})", ours, "analyses/min",
             f"create→running p50 {lat.group(1)} s, p99 {lat.group(2)} s" if lat else "", ceil,
             "bare local Pods through the local runtime", 0.9, f"{rss:.0f} MiB" if rss else "")]


def rows_plugins(text, env):
    path = os.path.join(env["WORK"], "results.tsv")
    res = {}
    try:
        for line in open(path):
            g, label, mb, secs, kb, cpu = line.rstrip("\n").split("\t")
            res[(g, label)] = (float(mb), float(secs), float(kb), float(cpu))
    except OSError:
        return []
    rows = []
    # (group, plugin, baseline, goal: the plugin at least this many times faster, by CPU time)
    for g, plugin, base, goal in (("trace", "trace-summary", "python ijson", 9.0),
                                  ("trace", "trace-summary", "python json.load", 9.0),
                                  ("xplane", "xplane-stats", "python protobuf", 21.0),
                                  ("xplane", "xplane-stats", "xprof hlo_stats converter", 11.0),
                                  ("hlo", "hlo-stats", "python records + cost model", None)):
        p, b = res.get((g, plugin)), res.get((g, base))
        if not p or not b:
            continue
        rows.append((f"`{plugin}` on {p[0]:.0f} MB of {g}", p[0] / p[3] if p[3] else None, "MB/s CPU",
                     f"{p[1]:.2f} s wall", b[0] / b[3] if b[3] else None, base, goal,
                     f"{p[2] / 1024:.0f} MiB (baseline {b[2] / 1024:.0f} MiB)"))
    return rows


ROWS = {"apiserver": rows_apiserver, "kube": rows_kube, "controller": rows_controller, "plugins": rows_plugins}


def fmt(v):
    if v is None:
        return "—"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def table(rows):
    out = ["| path | ours | p50 / p99 | ceiling, measured the same way | ratio | goal | peak RSS |",
           "|---|---|---|---|---|---|---|"]
    misses = []
    for path, ours, unit, lat, ceil, what, goal, rss in rows:
        ratio = ours / ceil if ours and ceil else None
        if goal is None:
            goal_s, ok = "(none set)", True
        elif goal >= 1.5:  # a plugin's lead: ours / baseline, at least goal times
            goal_s, ok = f"≥ {goal:g}×", ratio is not None and ratio >= goal
        else:
            goal_s, ok = f"≥ {goal:g}", ratio is not None and ratio >= goal
        ratio_s = "—" if ratio is None else (f"{ratio:.1f}×" if goal is None or goal >= 1.5 else f"{ratio:.2f}")
        mark = "" if ok else " **missed**"
        out.append(f"| {path} | {fmt(ours)} {unit} | {lat} | {what}: {fmt(ceil)} {unit} | {ratio_s}{mark} | "
                   f"{goal_s} | {rss} |")
        if not ok:
            misses.append(f"{path}: ratio {ratio_s}, goal {goal_s}")
    return "\n".join(out), misses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true", help="small sizes: the whole run in under 5 minutes")
    ap.add_argument("--only", default="apiserver kube controller plugins")
    ap.add_argument("--write-docs", action="store_true", help="replace the table in docs/benchmarks.md")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    sizes = QUICK if a.quick else FULL
    work = tempfile.mkdtemp(prefix="falcon-bench-all-")
    started = time.monotonic()
    rows, failures = [], []
    for name in a.only.split():
        rc, text, env = run(name, build, sizes[name], work, 1800 if a.quick else 7200)
        if rc != 0:
            failures.append(f"bench/{SCRIPTS[name]} failed ({rc}); its output: {work}/{name}.txt")
        rows += ROWS[name](text, env)
    tab, misses = table(rows)
    load = open("/proc/loadavg").read().split()[:3]
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "bench/all.sh" + (" --quick" if a.quick else "")
    header = (f"`{cmd}` on {when}: {os.cpu_count()} cores, load average {' '.join(load)} after the run, "
              f"{time.monotonic() - started:.0f} s in all. Each ratio is ours / the ceiling measured in the "
              f"same run (for the plugins: the plugin's MB/s of CPU time / the baseline's).")
    print("\n" + header + "\n\n" + tab)
    for f in failures:
        print("FAILED: " + f)
    for m in misses:
        print("goal missed: " + m)
    print(f"\nevery benchmark's own output: {work}")
    if a.write_docs:
        p = os.path.join(ROOT, "docs", "benchmarks.md")
        doc = open(p).read()
        if BEGIN not in doc or END not in doc:
            sys.exit(f"{p} has no block between {BEGIN} and {END}")
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        open(p, "w").write(head + BEGIN + "\n" + header + "\n\n" + tab + "\n" + END + tail)
        print(f"wrote the table into {p}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
