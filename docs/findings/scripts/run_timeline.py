#!/usr/bin/env python
"""Where a tiny ``ssbench run`` spends its wall time, from its process's start to its exit.

Runs matrices/gate.yaml cut to one repetition and one permutation (1 s warm-up, 3 s window;
``--whole``: both permutations, a run of the interleaved gate) on the embedded target, in a
child process that wraps the run's steps with timers (no change to the product). Each event is
seconds since the parent launched the child; the last is the parent seeing the child exit. With
several checkouts, the runs alternate round by round, side by side.

    python docs/findings/scripts/run_timeline.py --rounds 5 .             # the timeline
    python docs/findings/scripts/run_timeline.py --rounds 5 ../base .     # side by side

Each checkout runs with its own venv and its own server (``<pgdata-root>/<checkout's name>``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE_REP = ("repetitions: 5", "repetitions: 1")
ONE_PERMUTATION = ("dialogs: [per_thread, shared]", "dialogs: [per_thread]")


def matrix_text(root: Path, whole: bool) -> str:
    """gate.yaml with one repetition (a run of the interleaved gate), and unless ``whole`` one
    permutation."""
    text = (root / "matrices" / "gate.yaml").read_text()
    for old, new in (ONE_REP,) if whole else (ONE_REP, ONE_PERMUTATION):
        if old not in text:
            sys.exit(f"gate.yaml: no {old!r} to edit")
        text = text.replace(old, new)
    return text


# ---------------------------------------------------------------------- the child: one timed run
EVENTS: list[tuple[str, float]] = []
#: the parent's launch of this process, epoch seconds (every event counts from it)
T0 = float(os.environ.get("RUN_TIMELINE_T0") or time.time())


def mark(name: str) -> None:
    EVENTS.append((name, time.time() - T0))


def wrap(owner, attr: str, name: str | None = None, once: bool = False, enter: bool = True) -> None:
    """Mark ``name`` (default ``attr``) at each call's entry (``enter``) and exit; ``once``: the
    first call only."""
    fn = getattr(owner, attr, None)
    if fn is None:
        return
    name = name or attr
    seen = [0]

    @functools.wraps(fn)
    def timed(*a, **kw):
        seen[0] += 1
        first = not once or seen[0] == 1
        if first and enter:
            mark(f"{name} >")
        try:
            return fn(*a, **kw)
        finally:
            if first:
                mark(f"{name} <")

    setattr(owner, attr, staticmethod(timed) if isinstance(owner.__dict__.get(attr), staticmethod) else timed)


def wrap_calls(owner, attr: str, name: str) -> None:
    """Mark each call's entry and exit, numbered (a static method)."""
    fn = getattr(owner, attr)
    n = [0]

    def timed(*a, **kw):
        n[0] += 1
        k = n[0]
        mark(f"{name}#{k} >")
        try:
            return fn(*a, **kw)
        finally:
            mark(f"{name}#{k} <")
    setattr(owner, attr, staticmethod(timed))


def child(matrix: str, results: str, out: str) -> int:
    mark("python up")
    import harness.cli as cli
    mark("harness.cli imported")
    from harness import repetition, runner
    from harness.collectors import base
    from harness.commands import run as run_cmd
    from harness.load import series, swarm
    from harness.targets import factory

    wrap(factory, "make_target")
    wrap(runner, "start_run")
    for attr in ("setup", "run_swarm", "finish", "_drain_and_stop", "_summarize", "_write"):
        wrap(repetition.Repetition, attr)
    wrap(base.Sampler, "start", "collectors start")
    wrap(base.Sampler, "wait_for_references", "idle references")
    wrap(series.SwarmSeries, "_start", "series start")
    wrap(series.SwarmSeries, "hold", "series hold", once=True)     # where the series is held
    wrap(series.SwarmSeries, "ready", "series ready")
    wrap(swarm.Swarm, "start", "Locust processes spawned")
    wrap(swarm.Swarm, "wait", "swarm wait")
    wrap(swarm.Swarm, "close_in_background", "series close")
    wrap_calls(swarm.Swarm, "wait_closed", "wait for the closed series")
    wrap(swarm.Swarm, "_on_swarm", "master asks its plan", once=True, enter=False)
    wrap(run_cmd, "print_run_table", "run table")
    orig_status = swarm.Swarm._on_status
    phases: set[str] = set()

    def on_status(self, body):
        phase = body.get("phase")
        if phase and phase not in phases:
            phases.add(phase)
            mark(f"master: {phase}")
        return orig_status(self, body)

    swarm.Swarm._on_status = on_status
    orig_init = runner.Runner.__init__

    def runner_init(self, *a, **kw):
        orig_init(self, *a, **kw)
        t = self.target
        for attr in ("prepare", "create_dialogs", "warm_up", "settle", "start", "drain", "stop"):
            wrap_instance(t, attr)

    def wrap_instance(obj, attr):
        fn = getattr(obj, attr)
        n = [0]

        def timed(*a, **kw):
            n[0] += 1
            mark(f"target.{attr}#{n[0]} >")
            try:
                return fn(*a, **kw)
            finally:
                mark(f"target.{attr}#{n[0]} <")
        setattr(obj, attr, timed)

    runner.Runner.__init__ = runner_init
    try:
        code = cli.main(["run", matrix, "--results", results])
    finally:
        mark("main returned")
        Path(out).write_text(json.dumps(EVENTS))
    return code


# ---------------------------------------------------------------------- the parent
def run_once(checkout: Path, pgdata: Path, tmp: Path, whole: bool = False) -> dict | None:
    matrix = tmp / "m.yaml"
    matrix.write_text(matrix_text(checkout, whole))
    out = tmp / f"events-{time.monotonic_ns()}.json"
    env = {**os.environ, "SSBENCH_PGDATA": str(pgdata)}
    py = str(checkout / ".venv" / "bin" / "python")
    t0 = time.time()
    proc = subprocess.run([py, str(Path(__file__).resolve()), "--child", str(matrix), str(tmp / "results"), str(out)],
                          cwd=checkout, env={**env, "RUN_TIMELINE_T0": repr(t0)}, capture_output=True, text=True)
    t1 = time.time()
    if proc.returncode != 0:   # said, and left out of the figures
        print(f"{checkout}: ssbench run exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return None
    return {"wall": t1 - t0, "events": json.loads(out.read_text()), "probes": probe_figures(tmp / "results", t0)}


PROBE_FIELDS = ("cpu_speed", "cpu_reference_ms", "storage_probe_ms", "storage_reference_ms", "noisy_storage", "slow_cpu")


def probe_figures(results: Path, since: float) -> list[dict]:
    """The host probes' figures of each repetition summary the run wrote (its windows against
    its idle references)."""
    def find(node, out):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in PROBE_FIELDS:
                    out[k] = v
                else:
                    find(v, out)
        return out
    return [find(json.loads(p.read_text()), {}) for p in sorted(results.rglob("summary.json"))
            if p.stat().st_mtime >= since]


def median_spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child(*argv[1:4])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkouts", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pgdata-root", type=Path, default=Path("/var/tmp/ssbench-runtimeline"))
    ap.add_argument("--json", type=Path, help="every run's events, as JSON")
    ap.add_argument("--whole", action="store_true", help="both of gate.yaml's permutations (a gate run)")
    a = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    dirs = {c: a.pgdata_root / (c.resolve().name or "root") for c in a.checkouts}
    got: dict[str, list[dict]] = {str(c): [] for c in a.checkouts}
    with tempfile.TemporaryDirectory(prefix="runtimeline-") as tmp:
        for c, d in dirs.items():
            subprocess.run([str(c / ".venv" / "bin" / "ssbench"), "server", "start"], cwd=c, check=True,
                           env={**os.environ, "SSBENCH_PGDATA": str(d)}, capture_output=True)
            run_once(c, d, Path(tmp), a.whole)    # the databases provisioned, caches warm: not timed
        for rnd in range(a.rounds):
            for c in (a.checkouts if rnd % 2 == 0 else a.checkouts[::-1]):
                r = run_once(c, dirs[c], Path(tmp), a.whole)
                if r is not None:
                    got[str(c)].append(r)
                    print(f"round {rnd + 1} {c}: wall {r['wall']:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    for c, runs in got.items():
        print(f"\n{c}: wall {median_spread([r['wall'] for r in runs])} s over {len(runs)} run(s)")
        figs = [f for r in runs for f in r.get("probes", [])]
        if figs:
            speeds = [f["cpu_speed"] for f in figs if f.get("cpu_speed") is not None]
            ratios = [f["storage_probe_ms"] / f["storage_reference_ms"] for f in figs
                      if f.get("storage_probe_ms") and f.get("storage_reference_ms")]
            print(f"  {len(figs)} windows: cpu_speed {median_spread(speeds) if speeds else '-'}, slow_cpu "
                  f"{sum(bool(f.get('slow_cpu')) for f in figs)}; storage probe / reference "
                  f"{median_spread(ratios) if ratios else '-'}, noisy_storage {sum(bool(f.get('noisy_storage')) for f in figs)}")
        names: dict[str, list[float]] = {}
        for r in runs:
            for name, t in r["events"]:
                names.setdefault(name, []).append(t)
            names.setdefault("process exit seen", []).append(r["wall"])
        rows = sorted(names.items(), key=lambda kv: statistics.median(kv[1]))
        for name, ts in rows:
            print(f"  {median_spread(ts)}  {name}" + (f"  ({len(ts)}/{len(runs)})" if len(ts) != len(runs) else ""))
    if a.json:
        a.json.write_text(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
