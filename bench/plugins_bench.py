#!/usr/bin/env python3
"""Helpers of plugins_bench.sh: scale real profiles up, and the Python baselines a user would write.

  scale-trace SRC OUT MB       repeat SRC's traceEvents, shifted in time, until OUT is about MB megabytes
  scale-xplane SRC OUT MB K    every line's events repeated K times (a K-times longer profile), and the
                               planes copied (as more devices/hosts) until OUT is about MB megabytes
  scale-hlo SRC OUT MB         repeat SRC's modules (renamed) until OUT is about MB megabytes
  py-trace-json FILE           json.load + per-thread self time / busy time (the obvious script)
  py-trace-ijson FILE          the same with ijson streaming (yajl2_c backend when available)
  py-xplane FILE               protobuf XSpace.FromString + per-line self time per op
  py-hlo FILE                  regex scan: op counts and dot FLOPs per module (less work than hlo-stats:
                               no record per instruction, no shapes/bytes/metadata, FLOPs of dots only)
  py-hlo-records FILE OUT      regexes + json.dumps: one JSONL record per instruction (computation, name,
                               opcode, shape, dtype, elements, bytes, root, line, operands, metadata) and
                               one per module with its opcode counts; closer to hlo-stats' work, still
                               without its cost model
  py-hlo-cost FILE OUT         the same records with the cost model a user would write for the same figures:
                               per instruction flops (elementwise, dot, convolution, reduce and the called
                               computations of fusion/call/reduce/map), transcendentals and bytes accessed
                               (operands + output), and per module the totals (hlo-stats' work, roughly:
                               its FLOPs and transcendentals agree with hlo-stats on testdata/hlo; its bytes
                               leave out XLA's exceptions for fusions, tuples and slices)
  xprof FILE TOOL              XProf's converter (xspace_to_tool_data) on FILE
"""
import collections
import gzip
import json
import os
import re
import sys


def open_any(path, mode="rb"):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, mode) if magic == b"\x1f\x8b" else open(path, mode)


def scale_trace(src, out, mb):
    with open_any(src) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    lo = min(float(e["ts"]) for e in timed)
    hi = max(float(e["ts"]) + float(e.get("dur", 0)) for e in timed)
    span = (hi - lo) * 1.05 + 1
    target = mb * 1024 * 1024
    with open(out, "w") as f:
        f.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        f.write(",\n".join(json.dumps(e) for e in meta))
        k = 0
        while f.tell() < target:
            chunk = []
            for e in timed:
                c = dict(e)
                c["ts"] = round(float(e["ts"]) + k * span, 3)
                chunk.append(json.dumps(c))
            f.write(",\n" + ",\n".join(chunk))
            k += 1
        f.write("\n]}\n")
    print(f"wrote {out}: {os.path.getsize(out) / 2**20:.0f} MiB, {k} copies of {len(timed)} events")


def xplane_pb2():
    sys.path.insert(0, os.environ.get("XPLANE_PB2_DIR", "."))
    from plugins.xplane_stats import xplane_pb2 as pb  # generated from our xplane.proto by plugins_bench.sh
    return pb


def scale_xplane(src, out, mb, k):
    pb = xplane_pb2()
    space = pb.XSpace.FromString(open_any(src).read())
    # A K-times longer profile: events repeated with offsets shifted by the line's span.
    for plane in space.planes:
        for line in plane.lines:
            evs = list(line.events)
            if not evs:
                continue
            span = max(e.offset_ps + e.duration_ps for e in evs) - min(e.offset_ps for e in evs)
            span = int(span * 1.05) + 1
            for i in range(1, k):
                for e in evs:
                    c = line.events.add()
                    c.CopyFrom(e)
                    c.offset_ps = e.offset_ps + i * span
    planes = [p.SerializeToString() for p in space.planes]
    names = [p.name for p in space.planes]
    target = mb * 1024 * 1024
    copies = 0
    with open(out, "wb") as f:
        while f.tell() < target:
            for name, data in zip(names, planes):
                p = pb.XPlane.FromString(data)
                if copies:
                    p.name = f"{name}#{copies}"  # more devices / hosts
                    p.id = p.id + 1000 * copies
                f.write(pb.XSpace(planes=[p]).SerializeToString())  # repeated fields concatenate
            copies += 1
    print(f"wrote {out}: {os.path.getsize(out) / 2**20:.0f} MiB, {copies} copies of {len(planes)} planes, "
          f"lines x{k}")


def scale_hlo(src, out, mb):
    text = open_any(src, "rt").read()
    target = mb * 1024 * 1024
    n = 0
    with open(out, "w") as f:
        while f.tell() < target:
            f.write(re.sub(r"^HloModule (\S+?),", lambda m: f"HloModule {m.group(1)}_{n},", text, flags=re.M))
            f.write("\n")
            n += 1
    print(f"wrote {out}: {os.path.getsize(out) / 2**20:.0f} MiB, {n} modules")


def self_times(spans):
    """spans: list of (ts, dur, name) of one thread -> ({name: [count, total, self]}, busy)."""
    spans.sort(key=lambda s: (s[0], -s[1]))
    child = [0.0] * len(spans)
    stack = []
    busy, covered = 0.0, None
    for i, (ts, dur, _) in enumerate(spans):
        end = ts + dur
        while stack and spans[stack[-1]][0] + spans[stack[-1]][1] <= ts:
            stack.pop()
        if stack:
            p = spans[stack[-1]]
            child[stack[-1]] += min(end, p[0] + p[1]) - ts
        stack.append(i)
        if covered is None or end > covered:
            busy += end - (ts if covered is None else max(ts, covered))
            covered = end
    ops = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for i, (ts, dur, name) in enumerate(spans):
        o = ops[name]
        o[0] += 1
        o[1] += dur
        o[2] += max(0.0, dur - child[i])
    return ops, busy


def summarize_trace(events):
    threads = collections.defaultdict(list)
    n = 0
    for e in events:
        n += 1
        if e.get("ph") == "X" and "ts" in e:
            threads[(e.get("pid"), e.get("tid"))].append((float(e["ts"]), float(e.get("dur", 0)), e.get("name")))
    total_busy = 0.0
    top = collections.Counter()
    for key, spans in threads.items():
        ops, busy = self_times(spans)
        total_busy += busy
        for name, o in ops.items():
            top[name] += o[2]
    print(f"events={n} threads={len(threads)} busy_us={total_busy:.1f} top={top.most_common(3)}")


def py_trace_json(path):
    with open_any(path) as f:
        doc = json.load(f)
    summarize_trace(doc["traceEvents"] if isinstance(doc, dict) else doc)


def py_trace_ijson(path):
    import ijson
    with open_any(path) as f:
        summarize_trace(ijson.items(f, "traceEvents.item", use_float=True))


def py_xplane(path):
    pb = xplane_pb2()
    space = pb.XSpace.FromString(open_any(path).read())
    n = 0
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            spans = [(e.offset_ps, e.duration_ps, names.get(e.metadata_id, "")) for e in line.events]
            n += len(spans)
            self_times(spans)
    print(f"planes={len(space.planes)} events={n}")


def py_hlo(path):
    ins = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([a-z][a-z0-9\-]*)\((.*)$")
    shape_dims = re.compile(r"[a-z0-9]+\[([0-9,]*)\]")
    modules = collections.Counter()
    flops = 0
    shapes = {}
    for line in open_any(path, "rt"):
        if line.startswith("HloModule"):
            modules["modules"] += 1
            shapes = {}
            continue
        m = ins.match(line)
        if not m:
            continue
        shape, op = m.group(1), m.group(2)
        name = line.split("=")[0].split()[-1].lstrip("%")
        shapes[name] = shape
        modules[op] += 1
        if op == "dot":
            out = shape_dims.match(shape)
            lhs_name = m.group(3).split(",")[0].split()[-1].lstrip("%")
            lhs = shape_dims.match(shapes.get(lhs_name, ""))
            cd = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", line)
            if out and lhs and cd:
                o = 1
                for d in filter(None, out.group(1).split(",")):
                    o *= int(d)
                dims = [int(d) for d in filter(None, lhs.group(1).split(","))]
                k = 1
                for c in filter(None, cd.group(1).split(",")):
                    k *= dims[int(c)]
                flops += 2 * o * k
    print(f"modules={modules['modules']} instructions={sum(modules.values()) - modules['modules']} dot_flops={flops}")


# The HLO text of py-hlo-records and py-hlo-cost: an instruction line (root, name, shape, opcode, the rest),
# a computation's first line, an array shape, a layout, the metadata fields, and the bits of each type.
HLO_INS = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][a-z0-9\-]*)\((.*)$")
HLO_COMP = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
HLO_LEAF = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
HLO_LAYOUT = re.compile(r"\{[^{}]*\}")
HLO_META = re.compile(r'(op_name|op_type|source_file)="((?:[^"\\]|\\.)*)"|source_line=(\d+)')
HLO_BITS = {"pred": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "s32": 32, "u32": 32,
            "f32": 32, "s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128}


def add_metadata(rec, rest):
    """The instruction's metadata fields (op_name, op_type, source_file, source_line) into its record."""
    for key, value, source_line in HLO_META.findall(rest):
        if source_line:
            rec["source_line"] = int(source_line)
        else:
            rec[key] = value


def py_hlo_records(path, out_path):
    ins, comp, leaf, layout = HLO_INS, HLO_COMP, HLO_LEAF, HLO_LAYOUT
    bits = HLO_BITS
    module, computation, counts, instructions = None, None, collections.Counter(), 0

    def flush_module(out):
        if module is not None:
            out.write(json.dumps({"record_type": "module", "source": path, "module": module,
                                  "instructions": sum(counts.values()), "opcode_counts": dict(sorted(counts.items()))}) + "\n")

    with open(out_path, "w") as out:
        for lineno, line in enumerate(open_any(path, "rt"), 1):
            if line.startswith("HloModule"):
                flush_module(out)
                module, computation, counts = line.split()[1].rstrip(","), None, collections.Counter()
                continue
            m = ins.match(line)
            if not m:
                c = comp.match(line)
                if c:
                    computation = c.group(1)
                continue
            root, name, shape, op, rest = m.groups()
            elements, nbytes = 0, 0
            for dtype, dims in leaf.findall(shape):
                n = 1
                for d in filter(None, dims.split(",")):
                    n *= 0 if d == "?" else int(d.lstrip("<="))
                elements += n
                nbytes += (n * bits.get(dtype, 0) + 7) // 8
            operands = [a.split()[-1].lstrip("%") for a in rest.split(")", 1)[0].split(",") if a.strip()]
            rec = {"record_type": "instruction", "source": path, "module": module, "computation": computation,
                   "name": name, "opcode": op, "shape": layout.sub("", shape),
                   "dtype": "tuple" if shape.startswith("(") else shape.split("[", 1)[0],
                   "elements": elements, "bytes": nbytes, "is_root": bool(root), "line": lineno,
                   "operands": operands if op not in ("parameter", "constant", "iota") else []}
            add_metadata(rec, rest)
            out.write(json.dumps(rec) + "\n")
            counts[op] += 1
            instructions += 1
        flush_module(out)
    print(f"instructions={instructions}")


TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "power", "rsqrt", "sqrt",
                  "cbrt", "tanh", "logistic", "sine", "cosine", "tan", "atan2", "erf"}
ELEMENTWISE = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "compare",
               "select", "clamp", "and", "or", "xor", "not", "remainder", "sign", "floor", "ceil",
               "round-nearest-afz", "round-nearest-even", "shift-left", "shift-right-arithmetic",
               "shift-right-logical", "is-finite", "real", "imag", "complex", "popcnt", "clz"}
ZERO_BYTES = {"parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency", "domain",
              "opt-barrier"}


def py_hlo_cost(path, out_path):
    """py_hlo_records plus a cost model: computations are kept (name -> their instructions' costs) so that a
    fusion, call, reduce or map can add up the computation it calls; HLO text defines a computation before
    its callers."""
    ins, comp, leaf, layout = HLO_INS, HLO_COMP, HLO_LEAF, HLO_LAYOUT
    called = re.compile(r"(?:calls|to_apply|body)=%?([\w.\-]+)")
    contracting = re.compile(r"lhs_contracting_dims=\{([0-9,]*)\}")
    window = re.compile(r"window=\{size=([0-9x]+)")
    bits = HLO_BITS
    state = {"module": None, "counts": collections.Counter(), "flops": 0.0, "trans": 0.0, "bytes": 0.0}
    comp_cost = {}  # computation -> [flops, transcendentals] of its instructions
    shapes = {}  # instruction -> (dims of its first array, elements, bytes)
    computation, entry, instructions = None, False, 0

    def flush_module(out):
        if state["module"] is not None:
            out.write(json.dumps({"record_type": "module", "source": path, "module": state["module"],
                                  "instructions": sum(state["counts"].values()),
                                  "opcode_counts": dict(sorted(state["counts"].items())),
                                  "flops": state["flops"], "transcendentals": state["trans"],
                                  "bytes_accessed": state["bytes"]}) + "\n")

    with open(out_path, "w") as out:
        for lineno, line in enumerate(open_any(path, "rt"), 1):
            if line.startswith("HloModule"):
                flush_module(out)
                state.update(module=line.split()[1].rstrip(","), counts=collections.Counter(), flops=0.0,
                             trans=0.0, bytes=0.0)
                comp_cost, shapes, computation = {}, {}, None
                continue
            m = ins.match(line)
            if not m:
                c = comp.match(line)
                if c:
                    computation, entry = c.group(1), line.lstrip().startswith("ENTRY")
                    comp_cost[computation] = [0.0, 0.0]
                continue
            root, name, shape, op, rest = m.groups()
            elements, nbytes, first = 0, 0, None
            for dtype, dims in leaf.findall(shape):
                ds = [0 if d == "?" else int(d.lstrip("<=")) for d in filter(None, dims.split(","))]
                n = 1
                for d in ds:
                    n *= d
                if first is None:
                    first = (ds, n)
                elements += n
                nbytes += (n * bits.get(dtype, 0) + 7) // 8
            shapes[name] = (first[0] if first else [], first[1] if first else 0, nbytes)
            operands = [a.split()[-1].lstrip("%") for a in rest.split(")", 1)[0].split(",") if a.strip()]
            if op in ("parameter", "constant", "iota"):
                operands = []
            ops = [shapes.get(o, ([], 0, 0)) for o in operands]
            flops = trans = 0.0
            sub = comp_cost.get(called.search(rest).group(1), [0.0, 0.0]) if called.search(rest) else [0.0, 0.0]
            if op in TRANSCENDENTAL:
                trans = float(elements)
            elif op in ELEMENTWISE:
                flops = float(elements)
            elif op == "dot" and ops:
                k = 1
                cd = contracting.search(rest)
                for d in (filter(None, cd.group(1).split(",")) if cd else []):
                    k *= ops[0][0][int(d)] if int(d) < len(ops[0][0]) else 1
                flops = 2.0 * (first[1] if first else 0) * k
            elif op == "convolution" and len(ops) > 1:
                # 2 * output elements * kernel elements / output features (the kernel's spatial window times
                # its input features).
                out_elems = first[1] if first else 0
                kdims = ops[1][0]
                kernel = 1
                for d in kdims:
                    kernel *= d
                flops = 2.0 * out_elems * kernel / max(1, kdims[-1] if kdims else 1)
            elif op == "reduce" and ops:
                count = max(0, ops[0][1] - (first[1] if first else 0))
                flops, trans = sub[0] * count, sub[1] * count
            elif op == "reduce-window":
                w = window.search(rest)
                size = 1
                for d in (w.group(1).split("x") if w else []):
                    size *= int(d)
                flops, trans = sub[0] * (size - 1) * elements, sub[1] * (size - 1) * elements
            elif op == "map":
                flops, trans = sub[0] * elements, sub[1] * elements
            elif op in ("fusion", "call", "while", "async-start"):
                flops, trans = sub
            nb = 0.0 if op in ZERO_BYTES else float(sum(o[2] for o in ops) + nbytes)
            comp_cost[computation][0] += flops
            comp_cost[computation][1] += trans
            rec = {"record_type": "instruction", "source": path, "module": state["module"],
                   "computation": computation, "name": name, "opcode": op, "shape": layout.sub("", shape),
                   "dtype": "tuple" if shape.startswith("(") else shape.split("[", 1)[0],
                   "elements": elements, "bytes": nbytes, "is_root": bool(root), "line": lineno,
                   "operands": operands, "flops": flops, "transcendentals": trans, "bytes_accessed": nb}
            add_metadata(rec, rest)
            out.write(json.dumps(rec) + "\n")
            if entry:
                state["flops"] += flops
                state["trans"] += trans
                state["bytes"] += nb
            state["counts"][op] += 1
            instructions += 1
        flush_module(out)
    print(f"instructions={instructions} flops={state['flops']:.0f}")


def xprof(path, tool):
    from xprof.convert import raw_to_tool_data
    data, _ = raw_to_tool_data.xspace_to_tool_data([path], tool, {"use_saved_result": False})
    print(f"xprof {tool}: {len(data) if data else 0} bytes of output")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "scale-trace":
        scale_trace(args[0], args[1], int(args[2]))
    elif cmd == "scale-xplane":
        scale_xplane(args[0], args[1], int(args[2]), int(args[3]))
    elif cmd == "scale-hlo":
        scale_hlo(args[0], args[1], int(args[2]))
    elif cmd == "py-trace-json":
        py_trace_json(args[0])
    elif cmd == "py-trace-ijson":
        py_trace_ijson(args[0])
    elif cmd == "py-xplane":
        py_xplane(args[0])
    elif cmd == "py-hlo":
        py_hlo(args[0])
    elif cmd == "py-hlo-records":
        py_hlo_records(args[0], args[1])
    elif cmd == "py-hlo-cost":
        py_hlo_cost(args[0], args[1])
    elif cmd == "xprof":
        xprof(args[0], args[1])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
