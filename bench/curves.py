#!/usr/bin/env python3
"""Scale curves (issue 19): runs bench/scale.sh at several sizes and bench/kube_bench.sh at several numbers of
live Pods, and plots their figures to SVGs (no plotting library: a chart is a few lines and polylines).

  bench/curves.py [--build build] [--scales 0.001,0.01,0.1] [--pods 300,1000,3000] [--svg-dir docs]
                  [--json out.json]

SCALE 0.001 / 0.01 / 0.1 / 1 load 1,000 / 10,000 / 100,000 / 1,000,000 analysis records (a tenth of them
non-terminal, with Exps and artifacts in proportion: bench/scale.py --help). Each size is one scale.sh run on
a fresh private MariaDB. Prints one table (a row per size) and writes the SVG with three panels: API latency
p99 (the two gRPC and three HTTP calls of scale.sh), controller start -> ready / -> work queue drained, and
peak RSS of both servers. A size whose goals are missed is still plotted; the exit status is 1 then.

kube_bench.sh N=... (the test kube-apiserver, no kubelet: the Pods stay Pending, as on a full cluster) gives
per N: Pods/min created by the controller and by a bare client (curl), and the controller's CPU (% of a
core) and RSS while it tracks the N live Pods: docs/kube-curves.svg. --pods "" skips it.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import importlib

from benchlib import logger  # noqa: E402 (bench/ is on sys.path)

benchall = importlib.import_module("all")  # bench/all.py: the parsers of each benchmark's output

log = logger("curves", sys.stderr)
HERE = os.path.dirname(os.path.abspath(__file__))

PANELS = [
    ("API latency p99 (ms)", [
        ("awaiting_p99_ms", "gRPC ListExpsAwaitingAnalysis(100)"),
        ("awaiting_types_p99_ms", "the same, artifact_types=xplane"),
        ("GET /v1/analyses p99_ms", "GET /v1/analyses"),
        ("GET /v1/analyses?status=pending,running p99_ms", "GET ?status=pending,running"),
        ("GET /v1/analyses?status=failed,cancelled p99_ms", "GET ?status=failed,cancelled"),
    ]),
    ("controller start (s)", [
        ("ready_s", "-> /readyz 200 (recovery done)"),
        ("drained_s", "-> work queue drained"),
    ]),
    ("peak RSS (MiB)", [
        ("controller_rss_mib", "peak RSS MiB, analyzer-controller"),
        ("apiserver_rss_mib", "peak RSS MiB, falcon-apiserver"),
    ]),
]
KUBE_PANELS = [
    ("Pods created per minute", [
        ("controller_pods_per_min", "Pods/min, analyzer-controller"),
        ("ceiling_pods_per_min", "Pods/min, a bare client (curl)"),
    ]),
    ("controller CPU tracking N live Pods (% of a core)", [("cpu_percent", "CPU %, analyzer-controller")]),
    ("controller RSS tracking N live Pods (MiB)", [("rss_mib", "RSS MiB, analyzer-controller")]),
]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def esc(t):
    return t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * e:
            return m * e
    return 10 * e


def svg(runs, title, panels=PANELS, x_key="records", x_label="analysis records"):
    """Panels side by side: x = runs[i][x_key] (log scale), y = the figure (linear from 0)."""
    pw, ph, ml, mr, mt, mb = 330, 230, 55, 15, 40, 120
    width = len(panels) * (pw + ml + mr)
    height = ph + mt + mb + 30
    xs = [r[x_key] for r in runs]
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="13">{esc(title)}</text>']
    for pi, (ptitle, series) in enumerate(panels):
        ox = pi * (pw + ml + mr) + ml
        oy = mt + 20
        vals = [r["figures"].get(k) for r in runs for k, _ in series]
        ymax = nice_max(max([v for v in vals if v is not None] or [1.0]))
        X = lambda n: ox + (math.log10(n) - lo) / (hi - lo) * pw
        Y = lambda v: oy + ph - v / ymax * ph
        out.append(f'<text x="{ox}" y="{oy - 8}" font-size="12">{esc(ptitle)}</text>')
        out.append(f'<rect x="{ox}" y="{oy}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        for i in range(5):
            v = ymax * i / 4
            out.append(f'<line x1="{ox}" y1="{Y(v):.1f}" x2="{ox + pw}" y2="{Y(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{ox - 5}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        for n in xs:
            out.append(f'<text x="{X(n):.1f}" y="{oy + ph + 14}" text-anchor="middle">{n:,}</text>')
        out.append(f'<text x="{ox + pw / 2}" y="{oy + ph + 28}" text-anchor="middle">{esc(x_label)}</text>')
        for si, (key, label) in enumerate(series):
            color = COLORS[si % len(COLORS)]
            pts = [(X(r[x_key]), Y(r["figures"][key])) for r in runs if r["figures"].get(key) is not None]
            if len(pts) > 1:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="' +
                           " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
            for x, y in pts:
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>')
            missing = [r[x_key] for r in runs if r["figures"].get(key) is None]
            note = f" (not reached at {', '.join(f'{m:,}' for m in missing)})" if missing else ""
            ly = oy + ph + 44 + si * 14
            out.append(f'<line x1="{ox}" y1="{ly - 4}" x2="{ox + 16}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>')
            out.append(f'<text x="{ox + 20}" y="{ly}">{esc(label + note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def kube_curves(args, failed):
    runs = []
    with tempfile.TemporaryDirectory(prefix="falcon-curves.") as tmp:
        for n in [int(x) for x in args.pods.split(",") if x.strip()]:
            out = os.path.join(tmp, f"kube-{n}.txt")
            log(f"N={n}: bench/kube_bench.sh (its output: {out})")
            env = dict(os.environ, N=str(n), SAMPLES="20", CPU_SECONDS="10")
            with open(out, "w") as f:
                r = subprocess.run(["bash", os.path.join(HERE, "kube_bench.sh"), args.build], env=env, stdout=f,
                                   stderr=subprocess.STDOUT)
            text = open(out, errors="replace").read()
            fig = {"controller_pods_per_min": benchall.num(r"^controller: \d+ Pods in [\d.]+ s = (\d+) Pods/min", text),
                   "ceiling_pods_per_min": benchall.num(r"ratio controller / bare-client ceiling \((\d+) Pods/min\)", text),
                   "cpu_percent": benchall.num(r"cpu=([\d.]+)% rss_mib=\d+", text),
                   "rss_mib": benchall.num(r"cpu=[\d.]+% rss_mib=(\d+)", text)}
            if r.returncode != 0:
                failed.append(f"kube_bench.sh N={n} exited {r.returncode}: {text[-400:]}")
            runs.append({"pods": n, "figures": fig})
            log(f"N={n}: " + ", ".join(f"{k} {v}" for k, v in fig.items()))
    if not runs:
        return runs
    keys = [k for _, series in KUBE_PANELS for k, _ in series]
    print("\n| live Pods | " + " | ".join(label for _, series in KUBE_PANELS for _, label in series) + " |")
    print("|---|" + "---|" * len(keys))
    for r in runs:
        print(f"| {r['pods']:,} | " + " | ".join("—" if r["figures"].get(k) is None else f"{r['figures'][k]:,.1f}"
                                                for k in keys) + " |")
    path = os.path.join(args.svg_dir, "kube-curves.svg")
    with open(path, "w") as f:
        f.write(svg(runs, f"bench/curves.py: bench/kube_bench.sh at N = {', '.join(str(r['pods']) for r in runs)} "
                          f"(test kube-apiserver, Pods stay Pending); {os.cpu_count()} cores",
                    KUBE_PANELS, "pods", "live Pods (N)"))
    log(f"wrote {os.path.abspath(path)}")
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--scales", default="0.001,0.01,0.1", help="comma-separated SCALE values for scale.sh")
    ap.add_argument("--pods", default="300,1000,3000", help="comma-separated N for kube_bench.sh (empty: skip)")
    ap.add_argument("--svg-dir", default=os.path.join(HERE, "..", "docs"),
                    help="where scale-curves.svg and kube-curves.svg go")
    ap.add_argument("--json", help="also write every run's figures here")
    ap.add_argument("--scale-args", default="--steady-seconds=5 --reader-seconds=3",
                    help="more bench/scale.py flags for every run")
    args = ap.parse_args()

    runs, failed = [], []
    with tempfile.TemporaryDirectory(prefix="falcon-curves.") as tmp:
        for sc in [float(x) for x in args.scales.split(",") if x.strip()]:
            out = os.path.join(tmp, f"scale-{sc}.json")
            log(f"SCALE={sc}: bench/scale.sh (its output: {out}.log)")
            env = dict(os.environ, SCALE=str(sc), SCALE_ARGS=f"{args.scale_args} --json={out}")
            with open(out + ".log", "w") as f:
                r = subprocess.run([os.path.join(HERE, "scale.sh"), args.build], env=env, stdout=f,
                                   stderr=subprocess.STDOUT)
            if not os.path.exists(out):
                with open(out + ".log") as f:
                    tail = f.read()[-3000:]
                raise SystemExit(f"curves: scale.sh at SCALE={sc} failed ({r.returncode}) before its figures:\n{tail}")
            with open(out) as f:
                run = json.load(f)
            runs.append(run)
            if r.returncode != 0:
                failed.append(f"SCALE={sc}: {'; '.join(run['missed'])}")
            log(f"SCALE={sc}: {run['records']:,} records: " +
                ", ".join(f"{k} {v:.2f}" for k, v in run["figures"].items() if v is not None))
    keys = [k for _, series in PANELS for k, _ in series]
    print("| records | " + " | ".join(label for _, series in PANELS for _, label in series) + " |")
    print("|---|" + "---|" * len(keys))
    for r in runs:
        cells = [("—" if r["figures"].get(k) is None else f"{r['figures'][k]:.1f}") for k in keys]
        print(f"| {r['records']:,} | " + " | ".join(cells) + " |")
    sizes = ", ".join(f"{r['records']:,}" for r in runs)
    title = f"bench/curves.py: bench/scale.sh at {sizes} analysis records (a tenth non-terminal); {os.cpu_count()} cores"
    if runs:
        path = os.path.join(args.svg_dir, "scale-curves.svg")
        with open(path, "w") as f:
            f.write(svg(runs, title))
        log(f"wrote {os.path.abspath(path)}")
    kube = kube_curves(args, failed)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scale": runs, "kube": kube}, f, indent=1)
    if failed:
        print("MISSED: " + " | ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
