#!/usr/bin/env python3
"""Renders the reports of compare_xprof.py and compare_xla_cost.py as the Markdown agreement table of
docs/plugins.md. Usage: agreement_table.py XPROF.json XLA.json [--update docs/plugins.md]"""
import argparse
import collections
import re
import sys

import json

BEGIN, END = "<!-- agreement:begin (test/xprof/agreement.sh --update) -->", "<!-- agreement:end -->"


def render(xprof, xla):
    out = ["Per-HLO-op rows of XProf's `hlo_stats` vs `xplane-stats` (occurrences and total time; match = equal,",
           "within 1% = same occurrences and time within 1%; self time: rows whose total self time is within 1%;",
           "rates: TPU rows whose GFLOP/s and GiB/s are within 1% of XProf's, of the rows that have them):", "",
           "| xplane | XProf rows | our rows | match | within 1% | differs | only XProf | only ours | self time | rates |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for r in xprof:
        c = collections.Counter(op["verdict"] for op in r.get("ops", []))
        ops = r.get("ops", [])
        self_ok = sum(1 for op in ops if op.get("self_time", {}).get("within_1pct"))
        with_rates = [op for op in ops if op.get("rates")]
        rates_ok = sum(1 for op in with_rates if all(v["within_1pct"] for v in op["rates"].values()))
        rates_cell = f"{rates_ok} of {len(with_rates)}" if with_rates else "—"
        out.append(f"| `{r['file']}` | {r['xprof_ops']} | {r['our_ops']} | {c['match']} | {c['within 1%']} | "
                   f"{c['differs']} | {len(r['only_xprof'])} | {len(r['only_ours'])} | {self_ok} of {len(ops)} | {rates_cell} |")
        for op in r.get("ops", []):
            if op["verdict"] == "differs":
                notes.append(f"- `{r['file']}` {tuple(op['op'])}: XProf {op['xprof']}, ours {op['ours']}")
        for k in r["only_xprof"]:
            notes.append(f"- `{r['file']}` {tuple(k)}: only in XProf")
        for k in r["only_ours"]:
            notes.append(f"- `{r['file']}` {tuple(k)}: only in xplane-stats")
    out += [""] + (["Rows that differ or exist on one side only:", ""] + notes + [""] if notes else [])
    jaxv = xla[0]["jax"] if xla else "?"
    out += [f"Module figures of `hlo-stats` on the optimized HLO vs XLA's `compile().cost_analysis()` (jax {jaxv}, CPU):",
            "", "| program | FLOPs (XLA / ours) | transcendentals | bytes accessed | unmodelled custom-calls |",
            "|---|---|---|---|---|"]
    for r in xla:
        cells = []
        for k in ("flops", "transcendentals", "bytes_accessed"):
            v = r[k]
            cells.append(f"{v['verdict']} ({v['xla']:.0f} / {v['ours']:.0f})")
        unmod = ", ".join(f"{k}×{n}" for k, n in r["unmodelled_custom_calls"].items()) or "none"
        out.append(f"| {r['program']} | " + " | ".join(cells) + f" | {unmod} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("xprof")
    ap.add_argument("xla")
    ap.add_argument("--update")
    a = ap.parse_args()
    with open(a.xprof) as f:
        xprof = json.load(f)
    with open(a.xla) as f:
        xla = json.load(f)
    table = render(xprof, xla)
    if not a.update:
        sys.stdout.write(table)
        return 0
    with open(a.update) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        print(f"{a.update} has no agreement markers", file=sys.stderr)
        return 1
    doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: BEGIN + "\n" + table + END, doc,
                 flags=re.S)
    with open(a.update, "w") as f:
        f.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
