"""HLO text dumps (XLA --xla_dump_to, *.txt / *.hlo): opcode counts per module, with pandas.

Reads every HLO file below $FALCON_INPUT_DIR and writes $FALCON_OUTPUT_DIR/hlo-opcodes.jsonl, one record
per (module, opcode). Run: falcon analysis create --exp-id E --script hlo_opcodes.py --wait --follow
"""
import json
import os
import pathlib
import re

import pandas as pd

inp = pathlib.Path(os.environ["FALCON_INPUT_DIR"])
out = pathlib.Path(os.environ["FALCON_OUTPUT_DIR"]) / "hlo-opcodes.jsonl"

# "  [ROOT] name = shape opcode(operands), attributes": the opcode is the first word followed by "(" after "=".
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z0-9\-]*)\(")
rows = []
for path in sorted(inp.rglob("*")):
    if not path.is_file() or not (path.suffix in (".txt", ".hlo")):
        continue
    module = None
    for line in path.open(encoding="utf-8", errors="replace"):
        if line.startswith("HloModule "):
            module = line.split()[1].rstrip(",")
        elif module and (m := INSTRUCTION.match(line)):
            rows.append({"file": str(path.relative_to(inp)), "module": module, "opcode": m.group(1)})

df = pd.DataFrame(rows, columns=["file", "module", "opcode"])
counts = df.groupby(["file", "module", "opcode"]).size().rename("count").reset_index()
with out.open("w") as f:
    for rec in counts.to_dict("records"):
        f.write(json.dumps(rec) + "\n")
print(counts.sort_values("count", ascending=False).head(10).to_string(index=False))
print(f"{len(df)} instructions in {df['file'].nunique()} files -> {out.name}")
