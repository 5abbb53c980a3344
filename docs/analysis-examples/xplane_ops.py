"""jax.profiler XSpace profiles (*.xplane.pb): time per event name and plane, with the xplane proto module.

The image ships the Python module generated from the XSpace schema xplane-stats reads (xplane_pb2, on
PYTHONPATH). Writes $FALCON_OUTPUT_DIR/xplane-ops.jsonl: per plane and event name, occurrences and total
time in microseconds. Run: falcon analysis create --exp-id E --script xplane_ops.py --wait --follow
"""
import json
import os
import pathlib

import pandas as pd
import xplane_pb2

inp = pathlib.Path(os.environ["FALCON_INPUT_DIR"])
out = pathlib.Path(os.environ["FALCON_OUTPUT_DIR"]) / "xplane-ops.jsonl"

rows = []
for path in sorted(inp.rglob("*.xplane.pb")):
    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                meta = plane.event_metadata.get(event.metadata_id)
                rows.append({"file": path.name, "plane": plane.name, "line": line.name,
                             "name": meta.name if meta else str(event.metadata_id),
                             "duration_us": event.duration_ps / 1e6})

df = pd.DataFrame(rows, columns=["file", "plane", "line", "name", "duration_us"])
ops = (df.groupby(["file", "plane", "name"])["duration_us"].agg(occurrences="count", total_time="sum")
         .reset_index().sort_values("total_time", ascending=False))
with out.open("w") as f:
    for rec in ops.to_dict("records"):
        f.write(json.dumps(rec) + "\n")
print(ops.head(10).to_string(index=False))
print(f"{len(df)} events on {df['plane'].nunique()} planes -> {out.name}")
