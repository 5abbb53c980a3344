"""Chrome trace event JSON (*.trace.json, *.trace.json.gz): busy time per thread and top ops, with pandas.

Writes $FALCON_OUTPUT_DIR/trace-ops.jsonl: per (pid, tid, name) of the complete ("X") events, occurrences
and total duration in the trace's microseconds. Run: falcon analysis create --exp-id E --script
trace_threads.py --wait --follow
"""
import gzip
import json
import os
import pathlib

import pandas as pd

inp = pathlib.Path(os.environ["FALCON_INPUT_DIR"])
out = pathlib.Path(os.environ["FALCON_OUTPUT_DIR"]) / "trace-ops.jsonl"

frames = []
for path in sorted(p for p in inp.rglob("*") if p.name.endswith((".json", ".json.gz"))):
    with path.open("rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rt") if gz else path.open()) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    df = pd.DataFrame([e for e in events if e.get("ph") == "X"], columns=["pid", "tid", "name", "ts", "dur"])
    df["file"] = path.name
    frames.append(df)

df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["file", "pid", "tid", "name", "dur"])
ops = (df.groupby(["file", "pid", "tid", "name"])["dur"].agg(occurrences="count", total_time="sum")
         .reset_index().sort_values("total_time", ascending=False))
with out.open("w") as f:
    for rec in ops.to_dict("records"):
        f.write(json.dumps(rec, default=str) + "\n")
print(ops.head(10).to_string(index=False))
print(f"{len(df)} complete events in {df['file'].nunique()} files -> {out.name}")
