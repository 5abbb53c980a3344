#!/usr/bin/env python3
"""Writes the demo's sample artifacts into DIR: an HLO dump of a small matmul, a Chrome trace of a few
steps, a benchmark CSV, and (when the repository's testdata has one) a real xplane profile."""
import gzip
import json
import pathlib
import shutil
import sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
root = pathlib.Path(__file__).resolve().parent.parent

(out / "module_0001.jit_matmul.after_optimizations.txt").write_text("""\
HloModule jit_matmul, entry_computation_layout={(f32[128,256]{1,0}, f32[256,64]{1,0})->f32[128,64]{1,0}}

ENTRY main.4 {
  Arg_0.1 = f32[128,256]{1,0} parameter(0), metadata={op_name="x"}
  Arg_1.2 = f32[256,64]{1,0} parameter(1), metadata={op_name="w"}
  dot.3 = f32[128,64]{1,0} dot(Arg_0.1, Arg_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(matmul)/dot_general" source_file="demo.py" source_line=7}
  ROOT tanh.4 = f32[128,64]{1,0} tanh(dot.3), metadata={op_name="jit(matmul)/tanh" source_file="demo.py" source_line=8}
}
""")

events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:CPU:0"}},
          {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "main"}}]
t = 0
for step in range(5):
    events.append({"ph": "X", "pid": 1, "tid": 1, "name": f"train_step {step}", "ts": t, "dur": 1000})
    events.append({"ph": "X", "pid": 1, "tid": 1, "name": "dot.3", "ts": t + 100, "dur": 600})
    events.append({"ph": "X", "pid": 1, "tid": 1, "name": "tanh.4", "ts": t + 700, "dur": 200})
    t += 1200
with gzip.open(out / "host.trace.json.gz", "wt") as f:
    json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)

(out / "bench.csv").write_text("batch,step_ms\n32,10.5\n64,19.8\n128,38.9\n")

for candidate in sorted((root / "testdata").rglob("*.xplane.pb")) if (root / "testdata").is_dir() else []:
    shutil.copy(candidate, out / candidate.name)
    break
print(f"sample artifacts in {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
