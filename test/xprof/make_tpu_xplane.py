#!/usr/bin/env python3
"""Writes an XSpace with TPU device planes laid out as XProf's converters read them (no real TPU profile
can be recorded without a TPU): per core a `/device:TPU:N` plane with an "XLA Ops" line whose events name
the HLO op in their metadata (program_id, flops, bytes_accessed on the metadata), each event with the
device's own time in a `device_duration_ps` stat that differs from its span, and an "XLA Modules" line.
Several cores, several programs, the same op name in two programs, one event without a device duration.
As in real TPU profiles (XProf's test profile tpu_inference_2): the metadata's name is the instruction's
text and its display name the op name; one program's id is above 2^63 (a uint64 stat);
an "Async XLA Ops" line repeats an op with an hlo_op stat (XProf's hlo_stats does not count it).

The protobuf is encoded by hand (field numbers of tensorflow.profiler.XSpace), so this needs no generated
code and no protobuf package.  Usage: make_tpu_xplane.py OUT.xplane.pb [--cores N]
"""
import argparse


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def field_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return varint((num << 3) | 2) + varint(len(data)) + data


def stat(metadata_id, value):
    """XStat with an int64 (int; uint64 when above 2^63) or str value."""
    if isinstance(value, str):
        return field_varint(1, metadata_id) + field_bytes(5, value)
    return field_varint(1, metadata_id) + field_varint(3 if value >= 1 << 63 else 4, value)


STATS = {"program_id": 1, "flops": 2, "bytes_accessed": 3, "device_duration_ps": 4, "hlo_category": 5,
         "run_id": 6, "symbol_id": 7, "device_offset_ps": 8, "hlo_op": 9}
BIG = 12190760917235803885  # a program id above 2^63, a uint64 stat as in real TPU profiles

# (metadata id, op name, program, flops, bytes, category)
OPS = [
    (1, "fusion.1", 7, 1_000_000, 4096, "loop fusion"),
    (2, "convolution.2", 7, 8_000_000, 8192, "convolution"),
    (3, "all-reduce.3", 7, 1024, 2048, "all-reduce"),
    (4, "fusion.1", BIG, 500, 64, "loop fusion"),
    (5, "dot.5", BIG, 2_000_000, 16384, "dot"),
]
# Per step: (metadata id, offset ns, span ns, device ns or None); the device time differs from the span
# by -10 % .. +13 % as on real TPUs.
EVENTS = [
    (1, 0, 100, 90),
    (2, 200, 1000, 1130),
    (3, 1300, 300, 280),
    (1, 1700, 100, 95),
    (4, 2000, 50, None),
    (5, 2100, 400, 410),
]


def plane(core, steps):
    body = field_varint(1, core + 1) + field_bytes(2, f"/device:TPU:{core}")
    events = b""
    for step in range(steps):
        base = step * 5000
        for mid, off, span, dev in EVENTS:
            e = field_varint(1, mid) + field_varint(2, (base + off) * 1000) + field_varint(3, span * 1000)
            if dev is not None:
                # The device's own clock: start = the span's start, duration differs from the span.
                e += field_bytes(4, stat(STATS["device_offset_ps"], (1_000_000 + base + off) * 1000))
                e += field_bytes(4, stat(STATS["device_duration_ps"], (dev + core) * 1000))
            events += field_bytes(4, e)
    body += field_bytes(3, field_varint(1, 1) + field_bytes(2, "XLA Ops") + field_varint(3, 1_000_000) + events)
    # The async copy of real profiles: an event per step naming the op it completes in an hlo_op stat.
    asyncs = b""
    for step in range(steps):
        e = field_varint(1, 1) + field_varint(2, step * 5000 * 1000) + field_varint(3, 1500 * 1000)
        e += field_bytes(4, stat(STATS["hlo_op"], "fusion.1"))
        asyncs += field_bytes(4, e)
    body += field_bytes(3, field_varint(1, 3) + field_bytes(2, "Async XLA Ops") + field_varint(3, 1_000_000) + asyncs)
    modules = b""
    for step in range(steps):
        for program, off, span in ((7, 0, 1700), (BIG, 2000, 500)):
            e = field_varint(1, 100 + program % 1000) + field_varint(2, (step * 5000 + off) * 1000) + field_varint(3, span * 1000)
            e += field_bytes(4, stat(STATS["run_id"], step))
            modules += field_bytes(4, e)
    body += field_bytes(3, field_varint(1, 2) + field_bytes(2, "XLA Modules") + field_varint(3, 1_000_000) + modules)
    for mid, name, program, flops, nbytes, category in OPS:
        text = f"%{name} = f32[8]{{0}} {category.split()[-1]}(f32[8]{{0}} %p)"
        md = field_varint(1, mid) + field_bytes(2, text) + field_bytes(4, name)
        md += field_bytes(5, stat(STATS["program_id"], program))
        md += field_bytes(5, stat(STATS["symbol_id"], mid))
        md += field_bytes(5, stat(STATS["flops"], flops))
        md += field_bytes(5, stat(STATS["bytes_accessed"], nbytes))
        md += field_bytes(5, stat(STATS["hlo_category"], category))
        body += field_bytes(4, field_varint(1, mid) + field_bytes(2, md))
    for program in (7, BIG):
        mid = 100 + program % 1000
        md = field_varint(1, mid) + field_bytes(2, f"jit_program_{program}({program})")
        body += field_bytes(4, field_varint(1, mid) + field_bytes(2, md))
    for name, sid in STATS.items():
        body += field_bytes(5, field_varint(1, sid) + field_bytes(2, field_varint(1, sid) + field_bytes(2, name)))
    return body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    space = b"".join(field_bytes(1, plane(c, a.steps)) for c in range(a.cores))
    space += field_bytes(4, "tpu-host")
    with open(a.out, "wb") as f:
        f.write(space)


if __name__ == "__main__":
    main()
