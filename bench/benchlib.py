"""Helpers the Python benchmarks of bench/ share (soak.py, scale.py)."""
import socket
import sys
import time


def logger(name, stream=None):
    """A log(msg) that prints '[name HH:MM:SS] msg' to stream (stdout by default) at once."""
    def log(msg):
        print(f"[{name} {time.strftime('%H:%M:%S')}] {msg}", file=stream or sys.stdout, flush=True)
    return log


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def proc_status_kib(pid, key):
    """A kiB field of /proc/PID/status (VmRSS, VmHWM); None when the process or the field is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def pct(xs, q):
    """The q-quantile (0..1) of xs by the nearest rank below; NaN for no samples."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
