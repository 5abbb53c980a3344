"""The built-in plugins' JSONL results (hlo-stats.jsonl, xplane-stats.jsonl, trace-summary.jsonl,
file-stats.jsonl): one DataFrame per record_type, with pandas.

Give it an earlier analysis' results (falcon analysis results ID --download DIR, then falcon exp add-artifact
E --file DIR/hlo-stats.jsonl). Prints the record types of every JSONL file and, for hlo-stats, the modules
with the most FLOPs; writes $FALCON_OUTPUT_DIR/record-counts.jsonl.
"""
import json
import os
import pathlib

import pandas as pd

inp = pathlib.Path(os.environ["FALCON_INPUT_DIR"])
out = pathlib.Path(os.environ["FALCON_OUTPUT_DIR"]) / "record-counts.jsonl"

with out.open("w") as f:
    for path in sorted(inp.rglob("*.jsonl")):
        df = pd.read_json(path, lines=True)
        if df.empty or "record_type" not in df:
            continue
        for record_type, n in df["record_type"].value_counts().items():
            f.write(json.dumps({"file": path.name, "record_type": record_type, "records": int(n)}) + "\n")
        print(f"{path.name}: {len(df)} records, {dict(df['record_type'].value_counts())}")
        modules = df[df["record_type"] == "module"]
        if not modules.empty and "flops" in modules:
            print(modules.sort_values("flops", ascending=False)[["module", "stage", "flops"]].head(5)
                  .to_string(index=False))
