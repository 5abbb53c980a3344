#!/usr/bin/env python3
"""Compares hlo-stats' FLOPs, transcendentals and bytes with XLA's own cost analysis.

JAX programs (attention, a conv net, a scan loop, an FFT, a gather/scatter update, collectives over several
CPU devices, a dynamic-update-slice loop, layer norm, cross-entropy, an RNN, an MLP gradient, top-k) are
compiled with jax[cpu]; for each, the optimized HLO (`compiled.as_text()`) is given to
hlo-stats and its module figures are compared with `compiled.cost_analysis()`, which is XLA's
HloCostAnalysis on the same module. Each figure is `match` (equal), `within 1%`, or `differs`.

Usage: compare_xla_cost.py --plugin PATH/hlo-stats [--json OUT] [--only NAME,...]
Run it with the Python of a venv that has jax installed (see jax.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402


def programs():
    k = jax.random.PRNGKey(0)
    f32 = jnp.float32

    def attention(q, kk, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, kk) / jnp.sqrt(f32(q.shape[-1]))
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    def convnet(x, w1, w2):
        y = lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.conv_general_dilated(y, w2, (2, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(y)

    def scan_loop(xs, w):
        def step(c, x):
            c = jnp.tanh(c @ w + x)
            return c, c.sum()
        return lax.scan(step, jnp.zeros((xs.shape[1],), f32), xs)

    def fft2(x):
        return jnp.fft.fft2(x)

    def gather_scatter(table, idx, upd):
        return table.at[idx].add(upd)[idx + 1]

    def matmul_chain(a, b, c):
        return (a @ b) @ c

    def dus_loop(x, u):
        return lax.fori_loop(0, 8, lambda i, x: lax.dynamic_update_slice(x, u * i, (i * 2, 0)), x)

    def layernorm(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * g + b

    def cross_entropy(logits, labels):
        return -(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, logits.shape[-1])).sum()

    def rnn(xs, h, w, u):
        def step(h, x):
            h = jnp.tanh(x @ w + h @ u)
            return h, h
        return lax.scan(step, h, xs)

    def mlp_grad(w1, w2, x):
        return jax.grad(lambda w1, w2: jnp.sum(jnp.tanh(x @ w1) @ w2), argnums=(0, 1))(w1, w2)

    def top_k(x):
        return lax.top_k(x, 4)[0], jnp.sort(x, axis=-1)

    n = jax.device_count()

    def collectives(x):
        return jax.pmap(lambda v: lax.psum(v * 2.0, "i"), axis_name="i")(x)

    return {
        "attention": (attention, (jnp.ones((2, 4, 64, 32), f32), jnp.ones((2, 4, 64, 32), f32),
                                  jnp.ones((2, 4, 64, 32), f32))),
        "convnet": (convnet, (jnp.ones((2, 16, 16, 3), f32), jnp.ones((3, 3, 3, 8), f32),
                              jnp.ones((3, 3, 8, 16), f32))),
        "scan_loop": (scan_loop, (jnp.ones((16, 32), f32), jnp.ones((32, 32), f32))),
        "fft2": (fft2, (jnp.ones((8, 16, 32), jnp.complex64),)),
        "gather_scatter": (gather_scatter, (jnp.ones((64, 8), f32), jnp.arange(10) * 3,
                                            jnp.ones((10, 8), f32))),
        "matmul_chain": (matmul_chain, (jnp.ones((128, 256), f32), jnp.ones((256, 512), f32),
                                        jnp.ones((512, 64), f32))),
        "collectives": (collectives, (jnp.ones((n, 128), f32),)),
        "dus_loop": (dus_loop, (jnp.ones((16, 8), f32), jnp.ones((2, 8), f32))),
        "layernorm": (layernorm, (jnp.ones((32, 64), f32), jnp.ones((64,), f32), jnp.ones((64,), f32))),
        "cross_entropy": (cross_entropy, (jnp.ones((16, 100), f32), jnp.arange(16) % 100)),
        "rnn": (rnn, (jnp.ones((12, 4, 16), f32), jnp.ones((4, 32), f32), jnp.ones((16, 32), f32),
                      jnp.ones((32, 32), f32))),
        "mlp_grad": (mlp_grad, (jnp.ones((16, 32), f32), jnp.ones((32, 8), f32), jnp.ones((4, 16), f32))),
        # A custom-call XLA does not model (TopK on CPU): XLA counts -1 FLOPs and bytes for it, we count 0.
        "top_k": (top_k, (jnp.ones((8, 32), f32),)),
    }


def xla_cost(compiled):
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    return {"flops": float(ca.get("flops", 0.0)), "transcendentals": float(ca.get("transcendentals", 0.0)),
            "bytes_accessed": float(ca.get("bytes accessed", 0.0))}


def ours(plugin, hlo_text, tmp, name):
    path = os.path.join(tmp, f"{name}.after_optimizations.txt")
    out = os.path.join(tmp, f"{name}.jsonl")
    with open(path, "w") as f:
        f.write(hlo_text)
    subprocess.run([plugin, "--input", path, "--output", out], check=True, stderr=subprocess.DEVNULL,
                   timeout=120)
    mods = []
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            if r["record_type"] == "error":
                raise RuntimeError(f"hlo-stats error on {name}: {r}")
            if r["record_type"] == "module":
                mods.append(r)
    if len(mods) != 1:
        raise RuntimeError(f"{name}: expected one module, got {len(mods)}")
    return mods[0]


def verdict(theirs, mine):
    if theirs == mine:
        return "match"
    if theirs != 0 and abs(mine - theirs) / abs(theirs) <= 0.01:
        return "within 1%"
    return "differs"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--json")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (fn, args) in programs().items():
            if only and name not in only:
                continue
            compiled = jax.jit(fn).lower(*args).compile()
            theirs = xla_cost(compiled)
            mod = ours(a.plugin, compiled.as_text(), tmp, name)
            row = {"program": name, "module": mod["module"], "jax": jax.__version__,
                   "unmodelled_custom_calls": mod.get("unmodelled_custom_calls", {})}
            for key in ("flops", "transcendentals", "bytes_accessed"):
                row[key] = {"xla": theirs[key], "ours": float(mod[key]), "verdict": verdict(theirs[key], float(mod[key]))}
            results.append(row)
            print(f"{name:16} " + "  ".join(
                f"{k}: xla {row[k]['xla']:.0f} ours {row[k]['ours']:.0f} ({row[k]['verdict']})"
                for k in ("flops", "transcendentals", "bytes_accessed")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    flops_bad = [r["program"] for r in results if r["flops"]["verdict"] == "differs"]
    print(f"summary: {len(results)} programs; FLOPs differ for: {', '.join(flops_bad) or 'none'}")
    return 1 if flops_bad or not results else 0


if __name__ == "__main__":
    sys.exit(main())
