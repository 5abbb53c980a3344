#!/usr/bin/env python3
"""Compares xplane-stats with XProf on the same XSpace files.

For every file, XProf's own converter (pip package `xprof`, tool `hlo_stats`) and our `xplane-stats`
plugin are run; their per-HLO-op rows are matched on (program id, HLO op name) and compared:
occurrences must be equal and total time must agree within --tolerance (relative). Prints one table per
file and a summary; exits 1 when a figure differs beyond tolerance or when no op could be compared.

Usage: compare_xprof.py --plugin PATH/xplane-stats [--tolerance 0.01] [--json OUT] FILE.xplane.pb...
Run it with the Python of a venv that has `xprof` installed (see xprof.sh).

       compare_xprof.py --check-golden HLO_STATS.json[.gz] [--json OUT]
checks that a saved XProf hlo_stats table (e.g. XProf's golden output for a real TPU training profile) has
what this comparison reads, the way it reads it: the columns, one row per (program id, op name), the op
name being the instruction's name of the op text ("%NAME = ..."), avg x occurrences = total time and self
time <= total time. Needs no xprof package.
"""
import gzip
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile


def xprof_hlo_stats(path):
    """Rows of XProf's hlo_stats table: {(program_id, hlo_op_name): {...}}."""
    from xprof.convert import raw_to_tool_data

    # XProf's session lookup needs an absolute path (a relative one gives NOT_FOUND).
    data, _ = raw_to_tool_data.xspace_to_tool_data([os.path.abspath(path)], "hlo_stats", {"use_saved_result": False})
    if not data:
        raise RuntimeError(f"XProf produced no hlo_stats for {path}")
    return table_rows(json.loads(data if isinstance(data, str) else data.decode()))


# The columns of XProf's hlo_stats table this comparison reads.
COLUMNS = ("program_id", "hlo_op_name", "occurrences", "total_time", "total_self_time")


def table_rows(table):
    """{(program_id, hlo_op_name): row} of an hlo_stats table (DataTable JSON: cols + rows of cells)."""
    cols = [c["id"] for c in table["cols"]]
    rows = {}
    for row in table.get("rows", []):
        r = dict(zip(cols, [c.get("v") for c in row["c"]]))
        key = (str(r["program_id"]), r["hlo_op_name"])
        if key in rows:
            raise RuntimeError(f"two hlo_stats rows for {key}")
        rows[key] = r
    return rows


def check_golden(path):
    """The structure checks of --check-golden; returns a report with the problems found."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        table = json.load(f)
    cols = [c["id"] for c in table["cols"]]
    report = {"file": os.path.basename(path), "missing_columns": [c for c in COLUMNS if c not in cols],
              "rows": 0, "programs": 0, "problems": []}
    if report["missing_columns"]:
        return report
    rows = table_rows(table)
    report["rows"] = len(rows)
    report["programs"] = len({k[0] for k in rows})
    report["total_time"] = sum(float(r["total_time"]) for r in rows.values())
    report["occurrences"] = sum(int(r["occurrences"]) for r in rows.values())
    for (program, op), r in sorted(rows.items()):
        where = f"({program}, {op})"
        if not program.isdigit():
            report["problems"].append(f"{where}: program id is not a decimal number")
        text = r.get("hlo_op_expression")
        if text is not None and not text.startswith(f"%{op} = "):
            report["problems"].append(f"{where}: the op text does not define the op name: {text[:60]}")
        occ, total, self_ = float(r["occurrences"]), float(r["total_time"]), float(r["total_self_time"])
        if occ != int(occ) or occ < 1:
            report["problems"].append(f"{where}: occurrences {occ}")
        if "avg_time" in r and abs(float(r["avg_time"]) * occ - total) > 1e-6 * max(1.0, total):
            report["problems"].append(f"{where}: avg_time x occurrences != total_time")
        if self_ < 0 or self_ > total * (1 + 1e-9):
            report["problems"].append(f"{where}: self time {self_} outside [0, total {total}]")
    return report


def ours_hlo_ops(plugin, path):
    """Our hlo_op records of device planes, summed over planes: {(program_id, hlo_op_name): {...}}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.jsonl")
        subprocess.run([plugin, "--input", path, "--output", out], check=True,
                       stderr=subprocess.DEVNULL, timeout=600)
        agg = collections.defaultdict(lambda: {"occurrences": 0, "total_time": 0.0, "total_self_time": 0.0,
                                               "flops": None, "bytes_accessed": None})
        errors = []
        with open(out) as f:
            for line in f:
                r = json.loads(line)
                if r["record_type"] == "error":
                    errors.append(r)
                if r["record_type"] != "hlo_op" or not r["plane"].startswith("/device:"):
                    continue
                key = (str(r.get("program_id", "")), r["hlo_op_name"])
                agg[key]["occurrences"] += r["occurrences"]
                agg[key]["total_time"] += r["total_time"]
                agg[key]["total_self_time"] += r.get("total_self_time", 0.0)
                for k in ("flops", "bytes_accessed"):  # TPU rows: the metadata's per-op figures x occurrences
                    if k in r:
                        agg[key][k] = (agg[key][k] or 0.0) + r[k]
        if errors:
            raise RuntimeError(f"xplane-stats wrote error records for {path}: {errors}")
        return dict(agg)


def compare(plugin, path, tolerance):
    theirs = xprof_hlo_stats(path)
    ours = ours_hlo_ops(plugin, path)
    result = {"file": os.path.basename(path), "xprof_ops": len(theirs), "our_ops": len(ours),
              "compared": 0, "mismatches": [], "only_xprof": [], "only_ours": [], "ops": [],
              "xprof_total_time": 0.0, "our_total_time": 0.0}
    print(f"\n{os.path.basename(path)}")
    print(f"  {'program':>8} {'hlo_op_name':40} {'occ xprof':>9} {'occ ours':>8} "
          f"{'time xprof (us)':>15} {'time ours (us)':>15} {'diff %':>7}")
    for key in sorted(set(theirs) | set(ours)):
        t, o = theirs.get(key), ours.get(key)
        if t is None:
            result["only_ours"].append(key)
            continue
        if o is None:
            result["only_xprof"].append(key)
            continue
        result["compared"] += 1
        tt, ot = float(t["total_time"]), o["total_time"]
        result["xprof_total_time"] += tt
        result["our_total_time"] += ot
        diff = abs(ot - tt) / tt if tt else (0.0 if ot == 0 else 1.0)
        flag = ""
        same_occ = int(t["occurrences"]) == o["occurrences"]
        # Equal up to the rounding of summing microseconds in another order counts as a match.
        verdict = ("match" if same_occ and abs(ot - tt) <= 1e-9 * max(abs(tt), 1.0) else
                   "within 1%" if same_occ and diff <= 0.01 else "differs")
        # Self time must agree as well (within the tolerance).
        ts, os_ = float(t.get("total_self_time") or 0.0), o["total_self_time"]
        self_diff = abs(os_ - ts) / ts if ts else (0.0 if os_ == 0 else 1.0)
        result["ops"].append({"op": key, "xprof": [int(t["occurrences"]), tt], "ours": [o["occurrences"], ot],
                              "verdict": verdict, "self_time": {"xprof": ts, "ours": os_, "within_1pct": self_diff <= 0.01}})
        # TPU rows carry FLOPs and bytes: XProf's rates of the same time must agree too.
        rates = {}
        if o["flops"] is not None and o["bytes_accessed"] is not None and ot > 0:
            mine = {"model_flop_rate": o["flops"] / (ot * 1e3),
                    "measured_memory_bw": o["bytes_accessed"] / (ot * 1e-6) / 2**30}
            for k, v in mine.items():
                x = float(t.get(k) or 0.0)
                rates[k] = {"xprof": x, "ours": v, "within_1pct": abs(v - x) <= 0.01 * abs(x) if x else v == 0}
            result["ops"][-1]["rates"] = rates
        rates_ok = all(v["within_1pct"] for v in rates.values())
        if int(t["occurrences"]) != o["occurrences"] or diff > tolerance or self_diff > tolerance or not rates_ok:
            result["mismatches"].append({"op": key, "xprof": [t["occurrences"], tt, ts],
                                         "ours": [o["occurrences"], ot, os_]})
            flag = "  <-- differs"
        print(f"  {key[0]:>8} {key[1][:40]:40} {int(t['occurrences']):>9} {o['occurrences']:>8} "
              f"{tt:>15.3f} {ot:>15.3f} {100 * diff:>7.3f}{flag}")
    for key in result["only_xprof"]:
        print(f"  only in XProf: {key}")
    for key in result["only_ours"]:
        print(f"  only in xplane-stats: {key}")
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin")
    ap.add_argument("--check-golden")
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--json")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if args.check_golden:
        report = check_golden(args.check_golden)
        print(json.dumps({k: v for k, v in report.items() if k != "problems"}))
        for p in report["problems"]:
            print("  " + p)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
        sys.exit(1 if report["problems"] or report["missing_columns"] or not report["rows"] else 0)
    if not args.plugin or not args.files:
        ap.error("--plugin and at least one FILE.xplane.pb are needed")
    results = [compare(args.plugin, f, args.tolerance) for f in args.files]
    compared = sum(r["compared"] for r in results)
    bad = sum(len(r["mismatches"]) + len(r["only_xprof"]) for r in results)
    print(f"\nsummary: {compared} HLO ops compared over {len(results)} file(s); "
          f"{bad} differ or are missing from xplane-stats")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    if compared == 0 or bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
