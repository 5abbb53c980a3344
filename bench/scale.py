#!/usr/bin/env python3
"""The helper of bench/scale.sh: a team's scale on a real MariaDB, measured.

bench/scale.sh starts the private MariaDB (test/mariadb/mariadb.sh) and calls this with its directory;
this then
  1. starts falcon-apiserver once against it, which creates the schema (its migrations), and stops it;
  2. bulk-loads with INSERT ... SELECT over MariaDB's sequence tables (one statement per table, no API
     call per row), SCALE times: 100,000 completed Exps, 500,000 artifacts, 1,000,000 analysis records of
     which 100,000 are non-terminal (the newest: RUNNING of them RUNNING, the rest PENDING), written as the
     store writes them (UUIDv7 ids, microsecond times, result_gcs_path under the object store, the Pod name
     derived from the id as always);
  3. starts falcon-apiserver on the loaded database and times
       (a) gRPC ListExpsAwaitingAnalysis(100), the offline poller's call (bench scale_bench), plain and
           with the poller's artifact_types,
       (b) GET /v1/analyses, ?status=pending,running and ?status=failed,cancelled (first pages; the last
           matches records that are not the newest);
  4. starts analyzer-controller --runtime=local on an empty state dir (none of the records' Pods exists)
     and times start -> /readyz 200 (recovery done) and start -> its work queue drained
     (falcon_controller_work_queue_depth 0), then watches a steady-state window;
  5. reads the peak RSS (VmHWM) of the controller and the API server,
and prints a markdown table (figure | value | goal | ok?); exits 1 when a goal is missed.

What recovery does with the non-terminal records (src/controller/recovery.cc, reconciler.cc): every one is
listed (ListRunningAnalyses, pages of 500); a RUNNING record without a Pod had one that vanished while no
controller watched, so it is recreated, through admission like a new start (ahead of the PENDING ones); a
PENDING record without a Pod waits for admission (FIFO). Only what does not wait is put on the work queue,
and each resync skips what waits too. So RUNNING defaults to the online limit (8): those 8 Pods are
recreated (`sleep 3600` on Exps whose artifact files this script writes, so they stay running and hold the
slots) and every PENDING record keeps waiting — a full online queue with a backlog. The controller's
catalog is empty, so the offline poller is idle: the recovery figures are those of the 100k records alone
(the poller's query is figure (a)).
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

from benchlib import free_port, logger, pct, proc_status_kib  # noqa: E402 (bench/ is on sys.path)

BASE_US = 1_700_000_000 * 1_000_000  # 2023-11-14T22:13:20Z
ONLINE_LIMIT = 8  # the controller's default --online-concurrency
# The figures as numbers (milliseconds, seconds, MiB; None: not reached), for --json (bench/curves.py).
FIGURES = {}


log = logger("scale", sys.stderr)


class Counts:
    def __init__(self, scale, running):
        r = lambda n: max(1, int(round(n * scale)))
        self.exps = r(100_000)
        self.artifacts = max(self.exps, r(500_000))
        self.records = r(1_000_000)
        self.nonterminal = min(self.records, r(100_000))
        self.per_exp = self.artifacts // self.exps
        self.analysed_exps = self.exps * 8 // 10  # artifacts of the oldest 80% have their offline record
        self.offline = min(self.artifacts, self.analysed_exps * self.per_exp)
        self.offline = min(self.offline, self.records - self.nonterminal)
        self.online_terminal = self.records - self.nonterminal - self.offline
        self.running = min(running, self.nonterminal)
        # The non-terminal records belong to the newest Exps (1 per 1,000 records).
        self.nonterminal_exps = max(1, min(self.exps, self.nonterminal // 1000))


# --- SQL -------------------------------------------------------------------------------------------------

def pad(prefix, n_expr, width):
    return f"CONCAT('{prefix}', LPAD({n_expr}, {width}, '0'))"


def uuid7(us_expr, n_expr):
    """A canonical lower-case UUIDv7 (what NewUuidV7 makes): 48 bits of the record's millisecond time, then
    bits of n where the random bits go (n mod 2^26 is kept whole, so distinct n give distinct ids)."""
    ms = f"(({us_expr}) DIV 1000)"
    n = f"({n_expr})"
    return (f"LOWER(CONCAT(LPAD(HEX({ms} DIV 65536), 8, '0'), '-', LPAD(HEX({ms} % 65536), 4, '0'), '-7', "
            f"LPAD(HEX({n} % 4096), 3, '0'), '-', HEX(8 + ({n} DIV 4096) % 4), "
            f"LPAD(HEX(({n} DIV 16384) % 4096), 3, '0'), '-', "
            f"LPAD(HEX(({n} * 2654435761) % 281474976710656), 12, '0')))")


def seq(n):
    return f"seq_0_to_{n - 1}"


RECORD_COLS = ("analysis_id, name, exp_id, artifact_id, offline_artifact_id, analysis_type, plugin_name, status, "
               "result_gcs_path, error_message, command, script_content, script_name, created_at, updated_at, "
               "created_by, resource_override, image, timeout_seconds, rerun_of, infra_retries")

SCRIPT = ("import json, os, pathlib\n"
          "inp = pathlib.Path(os.environ['FALCON_INPUT_DIR'])\n"
          "sizes = {p.name: p.stat().st_size for p in inp.rglob('*') if p.is_file()}\n"
          "out = pathlib.Path(os.environ['FALCON_OUTPUT_DIR']) / 'sizes.json'\n"
          "out.write_text(json.dumps(sizes))\n")


def lit(s):
    """An SQL string literal of s (MariaDB's default sql_mode: backslash escapes)."""
    return "'" + s.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n") + "'"


def load_statements(c, obj_uri):
    """(what, SQL) pairs that load the data set; obj_uri ends with '/'."""
    E, A, P = c.exps, c.artifacts, c.per_exp
    fast = "SET SESSION unique_checks = 0, foreign_key_checks = 0; "
    out = []
    # Exps: exp-000000.., 1 s apart, all completed half a second after they were created.
    out.append(("exps", fast + (
        "INSERT INTO exps (exp_id, name, status, created_at, updated_at, completed_at, created_by) "
        f"SELECT {pad('exp-', 'seq', 6)}, {pad('scale exp ', 'seq', 6)}, 'completed', {BASE_US} + seq * 1000000, "
        f"{BASE_US} + seq * 1000000 + 500000, {BASE_US} + seq * 1000000 + 500000, '' FROM {seq(E)}")))
    # Artifacts: P per Exp (uploads, as the API server names them), 1 ms apart; offline_done for the oldest 80%.
    e = f"LEAST(seq DIV {P}, {E - 1})"
    out.append(("artifacts", fast + (
        "INSERT INTO artifacts (artifact_id, exp_id, artifact_type, uri, created_at, exp_completed, offline_done) "
        f"SELECT {pad('art-', 'seq', 7)}, {pad('exp-', e, 6)}, 'xplane', "
        f"CONCAT('{obj_uri}exps/', {pad('exp-', e, 6)}, '/files/artifact-', LPAD(seq, 7, '0'), '.xplane.pb'), "
        f"{BASE_US} + {e} * 1000000 + (seq % {P}) * 1000, 1, "
        f"CASE WHEN {e} < {c.analysed_exps} THEN 1 ELSE 0 END FROM {seq(A)}")))
    # Offline records: one succeeded xplane-stats run per artifact of the oldest 80% of the Exps, an hour
    # after the artifact (what the poller creates: name "<plugin> of <artifact>", no command).
    if c.offline:
        inner = (f"SELECT seq AS n, {pad('exp-', f'(seq DIV {P})', 6)} AS exp_id, {pad('art-', 'seq', 7)} AS art, "
                 f"{BASE_US} + (seq DIV {P}) * 1000000 + (seq % {P}) * 1000 + 3600000000 AS c FROM {seq(c.offline)}")
        out.append(("offline analysis records", fast + (
            f"INSERT INTO analysis_records ({RECORD_COLS}) "
            "SELECT id, CONCAT('xplane-stats of ', art), exp_id, art, art, 'offline', 'xplane-stats', 'succeeded', "
            f"CONCAT('{obj_uri}analysis/', exp_id, '/', id, '/'), '', '', NULL, '', c, c + 20000000, '', '', '', 0, "
            "'', 0 "
            f"FROM (SELECT t0.*, {uuid7('t0.c', 't0.n')} AS id FROM ({inner}) t0) t")))
    # Online records that finished: scripts over the whole history (0.2 s apart at SCALE=1); 1 in 25
    # failed, 1 in 100 cancelled, the rest succeeded.
    T = c.online_terminal
    if T:
        step = max(1, E * 1_000_000 // T)
        inner = (f"SELECT seq AS n, {pad('exp-', f'LEAST({E - 1}, seq * {E} DIV {T})', 6)} AS exp_id, "
                 f"{BASE_US} + 600000000 + seq * {step} AS c FROM {seq(T)}")
        status = "CASE WHEN n % 25 = 0 THEN 'failed' WHEN n % 100 = 1 THEN 'cancelled' ELSE 'succeeded' END"
        err = ("CASE WHEN n % 25 = 0 THEN 'exit code 1 (Error); last log lines:\\nTraceback (most recent call "
               "last):\\n  File \"analyse.py\", line 3, in <module>\\nKeyError: ''FALCON_INPUT_DIR''' "
               "WHEN n % 100 = 1 THEN 'cancelled by request' ELSE '' END")
        out.append(("online analysis records (terminal)", fast + (
            f"INSERT INTO analysis_records ({RECORD_COLS}) "
            f"SELECT id, CONCAT('sizes of ', exp_id), exp_id, NULL, NULL, 'online', '', {status}, "
            f"CONCAT('{obj_uri}analysis/', exp_id, '/', id, '/'), {err}, 'python3 analyse.py', "
            f"{lit(SCRIPT)}, 'analyse.py', c, c + 45000000, '', '', '', 0, '', 0 "
            f"FROM (SELECT t0.*, {uuid7('t0.c', 't0.n + 20000000')} AS id FROM ({inner}) t0) t")))
    # Non-terminal records: the newest, 10 ms apart, on the newest Exps; the oldest `running` are RUNNING
    # (they hold the online slots), the rest PENDING (the backlog), as submitted: a command, no script.
    NT, NE = c.nonterminal, c.nonterminal_exps
    inner = (f"SELECT seq AS n, {pad('exp-', f'({E - NE} + seq % {NE})', 6)} AS exp_id, "
             f"{BASE_US} + {E} * 1000000 + 7200000000 + seq * 10000 AS c FROM {seq(NT)}")
    out.append(("online analysis records (non-terminal)", fast + (
        f"INSERT INTO analysis_records ({RECORD_COLS}) "
        f"SELECT id, 'sleep 3600', exp_id, NULL, NULL, 'online', '', "
        f"CASE WHEN n < {c.running} THEN 'running' ELSE 'pending' END, "
        f"CONCAT('{obj_uri}analysis/', exp_id, '/', id, '/'), '', 'sleep 3600', NULL, '', c, "
        f"CASE WHEN n < {c.running} THEN c + 2000000 ELSE c END, '', '', '', 0, '', 0 "
        f"FROM (SELECT t0.*, {uuid7('t0.c', 't0.n + 40000000')} AS id FROM ({inner}) t0) t")))
    out.append(("ANALYZE TABLE", "ANALYZE TABLE exps, artifacts, analysis_records"))
    return out


class Db:
    def __init__(self, mariadb_sh, db_dir):
        self.sh, self.dir = mariadb_sh, db_dir

    def sql(self, statement):
        r = subprocess.run([self.sh, "sql", self.dir, "USE falcon; " + statement], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"SQL failed ({r.stderr.strip()}): {statement[:300]}")
        return [line.split("\t") for line in r.stdout.splitlines()]

    def scalar(self, statement):
        return self.sql(statement)[0][0]


def load(db, c, obj_dir):
    obj_uri = "file://" + obj_dir.rstrip("/") + "/"
    if int(db.scalar("SELECT COUNT(*) FROM analysis_records")) != 0:
        raise RuntimeError("the database is not empty")
    t_all = time.monotonic()
    for what, stmt in load_statements(c, obj_uri):
        t0 = time.monotonic()
        db.sql(stmt)
        log(f"loaded {what} in {time.monotonic() - t0:.1f} s")
    total = time.monotonic() - t_all
    got = {t: int(db.scalar(f"SELECT COUNT(*) FROM {t}")) for t in ("exps", "artifacts", "analysis_records")}
    by_status = dict((s, int(n)) for s, n in db.sql("SELECT status, COUNT(*) FROM analysis_records GROUP BY status"))
    want = {"exps": c.exps, "artifacts": c.artifacts, "analysis_records": c.records}
    if got != want:
        raise RuntimeError(f"loaded {got}, wanted {want}")
    if by_status.get("pending", 0) + by_status.get("running", 0) != c.nonterminal:
        raise RuntimeError(f"non-terminal records: {by_status}")
    # The artifact files of the Exps of the non-terminal records: a recreated Pod stages them.
    for e in range(c.exps - c.nonterminal_exps, c.exps):
        d = os.path.join(obj_dir, "exps", f"exp-{e:06d}", "files")
        os.makedirs(d, exist_ok=True)
        for n in range(e * c.per_exp, min(c.artifacts, (e + 1) * c.per_exp)):
            with open(os.path.join(d, f"artifact-{n:07d}.xplane.pb"), "wb") as f:
                f.write(b"scale bench artifact\n")
    log(f"loaded {got} ({by_status}) in {total:.1f} s")
    return total, by_status


# --- processes -------------------------------------------------------------------------------------------

def http_get(port, path, timeout=2.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def wait_http(port, path, proc, what, timeout, log_path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}); see {log_path}")
        try:
            if http_get(port, path, 1.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready within {timeout} s; see {log_path}")


def vm_hwm_mib(pid):
    kib = proc_status_kib(pid, "VmHWM")
    return kib / 1024 if kib is not None else float("nan")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(proc, grace=15):
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class ApiServer:
    def __init__(self, build, dsn, work, obj_dir, controller_port, log_name):
        self.http, self.grpc = free_port(), free_port()
        self.log_path = os.path.join(work, log_name)
        self.proc = subprocess.Popen(
            [os.path.join(build, "bin", "falcon-apiserver"), f"--db={dsn}", f"--http-listen=127.0.0.1:{self.http}",
             f"--grpc-listen=127.0.0.1:{self.grpc}", f"--controller-addr=127.0.0.1:{controller_port}",
             f"--object-store=file://{obj_dir}", "--auth=off", "--log-level=warn", "--drain-seconds=2"],
            stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"))
        wait_http(self.http, "/readyz", self.proc, "falcon-apiserver", 120, self.log_path)


# --- measurements ----------------------------------------------------------------------------------------

def http_latency(port, path, iterations, warmup=20, stop_at=None):
    """Sequential GETs on one kept-alive connection; ms of each after the warm-up. stop_at: a monotonic
    deadline instead of a count."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out, i, records = [], 0, None
    while True:
        if stop_at is None and i >= iterations + warmup:
            break
        if stop_at is not None and time.monotonic() >= stop_at:
            break
        t0 = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        dt = (time.perf_counter() - t0) * 1000
        if r.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {r.status}: {body[:200]!r}")
        if records is None:
            records = len(json.loads(body).get("analyses", []))
        if i >= warmup:
            out.append(dt)
        i += 1
    conn.close()
    return out, records


def metrics(port):
    status, body = http_get(port, "/metrics", 5.0)
    if status != 200:
        raise RuntimeError(f"controller /metrics: HTTP {status}")
    m = {}
    for line in body.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        mt = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)", line)
        if mt:
            try:
                m[mt.group(1)] = float(mt.group(2))
            except ValueError:
                pass
    return m


def metric(m, name, **labels):
    for k, v in m.items():
        base, _, rest = k.partition("{")
        if base != name:
            continue
        if all(f'{lk}="{lv}"' in rest for lk, lv in labels.items()):
            return v
    return None


def several_statuses(cols, statuses):
    """The statement of ListAnalysisRecords for several statuses (src/store/sql_store.cc): the first page of
    each status along analysis_records_status_created, merged."""
    branches = [f"SELECT analysis_id FROM (SELECT analysis_id FROM analysis_records WHERE status = '{st}' "
                f"ORDER BY created_at DESC, analysis_id DESC LIMIT 51) s{i}" for i, st in enumerate(statuses)]
    rcols = ", ".join("r." + col for col in cols.split(", "))
    return (f"SELECT {rcols} FROM analysis_records r JOIN ({' UNION ALL '.join(branches)}) k "
            "ON r.analysis_id = k.analysis_id ORDER BY r.created_at DESC, r.analysis_id DESC LIMIT 51")


def explain(db, sql):
    rows = db.sql("EXPLAIN " + sql)
    return "\n".join("  " + " | ".join(r) for r in rows)


def recovery(args, c, api, work, obj_dir, ctl_grpc, db_pid, results, info, extra=(), tag=""):
    """Starts the controller on an empty state dir and measures its recovery. With `extra` flags (a
    diagnostic pass): only start -> ready and start -> drained, as a note."""
    ctl_http = free_port()
    state = os.path.join(work, "state" + tag)
    os.makedirs(state, exist_ok=True)
    catalog = os.path.join(work, "catalog.yaml")
    with open(catalog, "w") as f:
        f.write("# bench/scale.sh: no plugin, so the offline poller stays idle\nplugins: []\n")
    log_path = os.path.join(work, f"controller{tag}.log")
    cmd = [os.path.join(args.build, "bin", "analyzer-controller"), f"--api-server=127.0.0.1:{api.grpc}",
           f"--grpc-listen=127.0.0.1:{ctl_grpc}", f"--http-listen=127.0.0.1:{ctl_http}", "--runtime=local",
           f"--state-dir={state}", f"--object-store=file://{obj_dir}", f"--plugin-catalog={catalog}",
           f"--online-concurrency={ONLINE_LIMIT}", "--log-level=info"] + list(extra)
    log("starting " + " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(cmd)))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    try:
        t_ready = t_drained = None
        peak_depth, low_depth = 0, None
        deadline = t0 + args.recovery_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"analyzer-controller exited ({proc.returncode}); see {log_path}")
            try:
                if t_ready is None:
                    if http_get(ctl_http, "/readyz", 1.0)[0] == 200:
                        t_ready = time.monotonic() - t0
                        log(f"controller ready after {t_ready:.2f} s")
                else:
                    m = metrics(ctl_http)
                    depth = metric(m, "falcon_controller_work_queue_depth") or 0
                    peak_depth = max(peak_depth, depth)
                    low_depth = depth if low_depth is None else min(low_depth, depth)
                    if depth == 0:
                        t_drained = time.monotonic() - t0
                        log(f"work queue drained after {t_drained:.2f} s (peak depth {peak_depth:.0f})")
                        break
            except OSError:
                pass
            time.sleep(0.05)
        if extra:
            n0 = metric(metrics(ctl_http), "falcon_controller_reconcile_duration_seconds_count") or 0
            info.append((f"the same with {' '.join(extra)}",
                         (f"ready after {t_ready:.1f} s, " if t_ready is not None else "not ready, ") +
                         (f"work queue drained after {t_drained:.1f} s: one pass over the {c.nonterminal:,} "
                          f"non-terminal records ({n0:.0f} reconciles, {n0 / max(1e-9, t_drained - t_ready):.0f}/s)"
                          if t_drained is not None and t_ready is not None else
                          f"not drained within {args.recovery_timeout:.0f} s")))
            return
        FIGURES["ready_s"], FIGURES["drained_s"] = t_ready, t_drained
        results.append(("controller start -> /readyz 200 (recovery done)",
                        f"{t_ready:.1f} s" if t_ready is not None else f"not within {args.recovery_timeout} s",
                        "< 60 s", t_ready is not None and t_ready < 60))
        results.append(("controller start -> work queue drained",
                        f"{t_drained:.1f} s" if t_drained is not None else
                        f"not within {args.recovery_timeout:.0f} s (depth at least {low_depth or 0:.0f} after "
                        f"a peak of {peak_depth:.0f})", "< 60 s", t_drained is not None and t_drained < 60))
        with open(log_path) as f:
            rec_line = next((l.strip() for l in f if "recovery:" in l), "")
        info.append(("recovery log", re.sub(r"^.*?recovery:", "recovery:", rec_line)))
        # Steady state: what the controller does next while nothing changes (every PENDING record waits
        # for a slot the RUNNING ones hold).
        m0 = metrics(ctl_http)
        cpu0 = {n: cpu_seconds(p) for n, p in (("controller", proc.pid), ("apiserver", api.proc.pid),
                                                 ("mariadbd", db_pid))}
        n0 = metric(m0, "falcon_controller_reconcile_duration_seconds_count") or 0
        w0 = time.monotonic()
        depths = []
        while time.monotonic() < w0 + args.steady_seconds:
            depths.append(metric(metrics(ctl_http), "falcon_controller_work_queue_depth") or 0)
            time.sleep(0.25)
        m1 = metrics(ctl_http)
        dt = time.monotonic() - w0
        n1 = metric(m1, "falcon_controller_reconcile_duration_seconds_count") or 0
        cpu = {n: cpu_seconds(p) - cpu0[n] for n, p in (("controller", proc.pid), ("apiserver", api.proc.pid),
                                                           ("mariadbd", db_pid))}
        waiting = metric(m1, "falcon_controller_queue_waiting", queue="online")
        running = metric(m1, "falcon_controller_running", queue="online")
        errors = metric(m1, "falcon_controller_reconcile_errors_total") or 0
        info.append((f"steady state (the {dt:.0f} s after the drain, or after the timeout)",
                     f"{(n1 - n0) / dt:.0f} reconciles/s, work queue depth {min(depths):.0f} to {max(depths):.0f}; "
                     f"online: {running:.0f} running, {waiting:.0f} waiting; reconcile errors {errors:.0f}; "
                     f"CPU: controller {cpu['controller'] / dt * 100:.0f}%, apiserver {cpu['apiserver'] / dt * 100:.0f}%, "
                     f"mariadbd {cpu['mariadbd'] / dt * 100:.0f}% of a core"))
        # Then the API server's list under that load.
        lat = http_latency(api.http, "/v1/analyses?status=pending,running", 0, warmup=5,
                           stop_at=time.monotonic() + args.reader_seconds)[0]
        if lat:
            info.append(("GET /v1/analyses?status=pending,running meanwhile",
                         f"p50 {pct(lat, 0.5):.1f} ms, p99 {pct(lat, 0.99):.1f} ms (n={len(lat)})"))
        pods = os.listdir(os.path.join(state, "pods")) if os.path.isdir(os.path.join(state, "pods")) else []
        phases = {}
        for p in pods:
            if p.startswith("."):
                continue
            try:
                with open(os.path.join(state, "pods", p, "status.json")) as f:
                    ph = json.load(f).get("phase", "?")
            except (OSError, ValueError):
                ph = "?"
            phases[ph] = phases.get(ph, 0) + 1
        info.append(("local Pods after recovery", f"{sum(phases.values())} "
                     f"({', '.join(f'{k} {v}' for k, v in sorted(phases.items()))}; recreated for the RUNNING records)"))
        if waiting is not None and running is not None and int(waiting + running) != c.nonterminal:
            info.append(("WARNING", f"admission holds {waiting + running:.0f} analyses, expected {c.nonterminal}"))
        rss = vm_hwm_mib(proc.pid)
        FIGURES["controller_rss_mib"] = rss
        FIGURES["steady_controller_cpu"] = cpu["controller"] / dt
        results.append(("analyzer-controller peak RSS (VmHWM)", f"{rss:.0f} MiB", "< 512 MiB", rss < 512))
    finally:
        stop(proc)
        # The local Pods outlive the controller: delete them.
        pods_dir = os.path.join(state, "pods")
        for p in (os.listdir(pods_dir) if os.path.isdir(pods_dir) else []):
            if p.startswith("."):
                continue
            subprocess.run([os.path.join(args.build, "bin", "falcon-localpod"), f"--state-dir={state}", "delete",
                            p, "--grace=0"], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="build directory (bin/ has the binaries)")
    ap.add_argument("--mariadb-sh", required=True, help="test/mariadb/mariadb.sh")
    ap.add_argument("--db-dir", required=True, help="the directory of the running private MariaDB")
    ap.add_argument("--work", required=True, help="where the logs, the object store and the state dir go")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--running", type=int, default=ONLINE_LIMIT,
                    help="RUNNING records among the non-terminal ones (default: the online limit)")
    ap.add_argument("--iterations", type=int, default=300, help="calls per latency figure")
    ap.add_argument("--recovery-timeout", type=float, default=180,
                    help="seconds to wait for /readyz and then for the drained work queue")
    ap.add_argument("--steady-seconds", type=float, default=25, help="the steady-state window after it")
    ap.add_argument("--json", help="also write the figures as numbers to this file (for bench/curves.py)")
    ap.add_argument("--reader-seconds", type=float, default=10,
                    help="then GET /v1/analyses?status=pending,running this long, under the controller's load")
    args = ap.parse_args()

    c = Counts(args.scale, args.running)
    db = Db(args.mariadb_sh, args.db_dir)
    with open(os.path.join(args.db_dir, "dsn")) as f:
        dsn = f.read().strip()
    with open(os.path.join(args.db_dir, "server.pid")) as f:
        db_pid = int(f.read().strip())
    work = args.work
    obj_dir = os.path.join(work, "objects")
    os.makedirs(obj_dir, exist_ok=True)
    ctl_grpc = free_port()
    results, info = [], []
    log(f"SCALE={args.scale}: {c.exps} exps, {c.artifacts} artifacts, {c.records} analysis records "
        f"({c.offline} offline, {c.online_terminal} online terminal, {c.nonterminal} non-terminal of which "
        f"{c.running} running)")

    api = ApiServer(args.build, dsn, work, obj_dir, ctl_grpc, "apiserver-migrate.log")  # creates the schema
    stop(api.proc)
    load_s, by_status = load(db, c, obj_dir)
    info.append(("bulk load (INSERT ... SELECT, then ANALYZE)", f"{load_s:.1f} s"))
    info.append(("records by status", ", ".join(f"{k} {v}" for k, v in sorted(by_status.items()))))

    api = ApiServer(args.build, dsn, work, obj_dir, ctl_grpc, "apiserver.log")
    try:
        bench = os.path.join(args.build, "bin", "scale_bench")
        for label, extra in (("", []), (" (artifact_types=xplane, as the poller)", ["--types=xplane"])):
            r = subprocess.run([bench, "awaiting", f"--addr=127.0.0.1:{api.grpc}", f"--iterations={args.iterations}",
                                "--limit=100"] + extra, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"scale_bench failed: {r.stderr.strip()}")
            a = json.loads(r.stdout)
            if a["items"] != 100:
                info.append(("WARNING", f"ListExpsAwaitingAnalysis{label} returned {a['items']} items, not 100"))
            FIGURES["awaiting" + ("_types" if extra else "") + "_p99_ms"] = a["p99_ms"]
            results.append((f"gRPC ListExpsAwaitingAnalysis(100){label} p50 / p99",
                            f"{a['p50_ms']:.2f} / {a['p99_ms']:.2f} ms", "< 20 ms", a["p99_ms"] < 20))
        # failed,cancelled: matches that are not the newest records (the backlog of PENDING ones is newer).
        for path in ("/v1/analyses", "/v1/analyses?status=pending,running", "/v1/analyses?status=failed,cancelled"):
            lat, n = http_latency(api.http, path, args.iterations)
            if n != 50:
                info.append(("WARNING", f"GET {path} returned {n} records, not 50"))
            p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
            FIGURES[f"GET {path} p99_ms"] = p99
            results.append((f"GET {path} first page p50 / p99", f"{p50:.2f} / {p99:.2f} ms", "< 20 ms", p99 < 20))
        # The plans, for the record (the statements the store runs for these calls).
        cols = ("analysis_id, name, exp_id, artifact_id, analysis_type, plugin_name, status, result_gcs_path, "
                "error_message, command, script_content, script_name, created_at, updated_at, created_by, "
                "resource_override, image, timeout_seconds, rerun_of, infra_retries")
        plans = {
            "GET /v1/analyses": f"SELECT {cols} FROM analysis_records WHERE 1 = 1 "
                                "ORDER BY created_at DESC, analysis_id DESC LIMIT 51",
            "GET /v1/analyses?status=pending,running": several_statuses(cols, ("pending", "running")),
            "GET /v1/analyses?status=failed,cancelled": several_statuses(cols, ("cancelled", "failed")),
        }
        # A page of the controller's listing from the middle of the PENDING records (its cursor: the last row
        # of the page before).
        mid = db.sql(f"SELECT created_at, analysis_id FROM analysis_records WHERE status = 'pending' "
                     f"ORDER BY created_at, analysis_id LIMIT {max(0, c.nonterminal // 2 - 1)}, 1")
        if mid:
            at, aid = mid[0]
            plans["ListRunningAnalyses, a page from the middle"] = (
                f"SELECT {cols} FROM analysis_records WHERE status = 'pending' AND (created_at > {at} OR "
                f"(created_at = {at} AND analysis_id > '{aid}')) ORDER BY created_at, analysis_id LIMIT 501")
        with open(os.path.join(work, "explain.txt"), "w") as f:
            for what, q in plans.items():
                f.write(f"{what}:\n{explain(db, q)}\n")
        recovery(args, c, api, work, obj_dir, ctl_grpc, db_pid, results, info)
        if not results[-2][3]:
            # Not drained: once more without a resync during the pass, to measure what one pass takes.
            log("the work queue did not drain; once more with --resync-interval=600 to time one pass")
            recovery(args, c, api, work, obj_dir, ctl_grpc, db_pid, results, info,
                     extra=("--resync-interval=600",), tag="-resync600")
        rss = vm_hwm_mib(api.proc.pid)
        FIGURES["apiserver_rss_mib"] = rss
        results.append(("falcon-apiserver peak RSS (VmHWM)", f"{rss:.0f} MiB", "< 512 MiB", rss < 512))
    finally:
        stop(api.proc)

    print(f"\nScale: SCALE={args.scale}: {c.exps:,} Exps, {c.artifacts:,} artifacts, {c.records:,} analysis records "
          f"({c.nonterminal:,} non-terminal, {c.running} of them running); MariaDB "
          f"{db.scalar('SELECT VERSION()')}; {os.cpu_count()} cores, load average "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}\n")
    print("| figure | value | goal | ok? |")
    print("|---|---|---|---|")
    for fig, val, goal, ok in results:
        print(f"| {fig} | {val} | {goal} | {'yes' if ok else 'NO'} |")
    print()
    for what, val in info:
        print(f"- {what}: {val}")
    with open(os.path.join(work, "explain.txt")) as f:
        print("\nQuery plans (EXPLAIN on the loaded data):\n" + f.read())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"scale": args.scale, "records": c.records, "nonterminal": c.nonterminal,
                       "figures": FIGURES, "missed": [fig for fig, _, _, ok in results if not ok]}, f, indent=1)
    missed = [fig for fig, _, _, ok in results if not ok]
    if missed:
        print("MISSED: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
