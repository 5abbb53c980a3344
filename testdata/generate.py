#!/usr/bin/env python3
"""Generates the plugins' test data with real JAX on CPU: HLO dumps and profiles of three small programs.

Usage: python3 generate.py [OUTDIR]   (default: the folder of this script)
Needs: pip install jax   (the committed files were made with the version in VERSIONS.txt)

Programs (shapes chosen so figures can be checked by hand, see README.md):
  matmul_chain  f(a, b, c) = (a @ b) @ c, a f32[128,256], b f32[256,512], c f32[512,64]
  mlp_step      one SGD step of a 2-layer MLP (x f32[32,64] -> 128 -> 10, tanh, softmax cross-entropy)
  scan_cumsum   lax.scan adding rows of f32[16,8] into a carry
Each program runs in its own process with XLA_FLAGS=--xla_dump_to so that its dump holds only its
modules; only the *before_optimizations.txt / *after_optimizations.txt files are kept. The profile
(jax.profiler.trace) runs matmul_chain and mlp_step for 5 steps each under StepTraceAnnotation and keeps
the XSpace (*.xplane.pb) and the Perfetto/Chrome trace (*.trace.json.gz).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

PROGRAMS = r'''
import jax, jax.numpy as jnp
from jax import lax

def matmul_chain(a, b, c):
    return (a @ b) @ c

def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.sum(logp * y, axis=-1))

def mlp_step(params, x, y):
    grads = jax.grad(mlp_loss)(params, x, y)
    return [p - 0.01 * g for p, g in zip(params, grads)]

def scan_cumsum(xs):
    def body(carry, row):
        carry = carry + row
        return carry, carry * 2.0
    return lax.scan(body, jnp.zeros(xs.shape[1:], xs.dtype), xs)

def inputs(name):
    # numpy inputs, so that the dumps hold no extra modules for random number generation
    import numpy as np
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape, dtype=np.float32)
    if name == "matmul_chain":
        return (f32(128, 256), f32(256, 512), f32(512, 64))
    if name == "mlp_step":
        params = [f32(64, 128) * 0.1, np.zeros(128, np.float32), f32(128, 10) * 0.1, np.zeros(10, np.float32)]
        y = np.eye(10, dtype=np.float32)[np.arange(32) % 10]
        return (params, f32(32, 64), y)
    if name == "scan_cumsum":
        return (f32(16, 8),)
    raise ValueError(name)

FUNCS = {"matmul_chain": matmul_chain, "mlp_step": mlp_step, "scan_cumsum": scan_cumsum}
'''

DUMP_ONE = PROGRAMS + r'''
import sys
name = sys.argv[1]
args = inputs(name)
jax.block_until_ready(jax.jit(FUNCS[name])(*args))
'''

PROFILE = PROGRAMS + r'''
import sys
logdir = sys.argv[1]
jitted = {n: jax.jit(FUNCS[n]) for n in ("matmul_chain", "mlp_step")}
data = {n: inputs(n) for n in jitted}
for n, f in jitted.items():  # compile outside the profile
    jax.block_until_ready(f(*data[n]))
with jax.profiler.trace(logdir, create_perfetto_trace=True):
    for step in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            for n, f in jitted.items():
                jax.block_until_ready(f(*data[n]))
'''


def run(code, *args, env=None):
    subprocess.run([sys.executable, "-c", code, *args], check=True, env=env)


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
    base_env = dict(os.environ, JAX_PLATFORMS="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("matmul_chain", "mlp_step", "scan_cumsum"):
            dump = os.path.join(tmp, name)
            env = dict(base_env, XLA_FLAGS=f"--xla_dump_to={dump} --xla_dump_hlo_as_text")
            run(DUMP_ONE, name, env=env)
            dest = os.path.join(out, "hlo", name)
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            for f in sorted(glob.glob(os.path.join(dump, "*"))):
                b = os.path.basename(f)
                if b.endswith("before_optimizations.txt") or b.endswith("after_optimizations.txt"):
                    shutil.copy(f, dest)
        logdir = os.path.join(tmp, "profile")
        run(PROFILE, logdir, env=base_env)
        dest = os.path.join(out, "profile")
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for f in glob.glob(os.path.join(logdir, "**", "*"), recursive=True):
            b = os.path.basename(f)
            if b.endswith(".xplane.pb"):
                shutil.copy(f, os.path.join(dest, "jax_cpu.xplane.pb"))
            elif b.endswith(".trace.json.gz") or b.endswith("perfetto_trace.json.gz"):
                shutil.copy(f, os.path.join(dest, "jax_cpu.trace.json.gz"))
    import importlib.metadata as md
    with open(os.path.join(out, "VERSIONS.txt"), "w") as f:
        for p in ("jax", "jaxlib"):
            f.write(f"{p}=={md.version(p)}\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
