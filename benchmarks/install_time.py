#!/usr/bin/env python
"""How long does the first ``make`` take to set up ``.venv``, pip against uv? (issue 28; not a test)

``make test`` and ``make bench`` start, on a fresh clone, by creating ``.venv`` and installing
ssbench with its test extras. On a fresh machine nothing is cached, so that step downloads every
dependency and builds pyspark's source distribution. This times the two ways side by side, in
alternated order, each round from nothing: a new venv and an empty package cache of its own.

* ``pip``: what the Makefile did up to 2026-11-27 (``pip install --upgrade pip``, then
  ``pip install -e '.[test]'``, which compiles every installed module to bytecode);
* ``uv``: what it does now (``pip install uv``, then ``uv pip install --compile-bytecode -e
  '.[test]'``: the same packages, the same bytecode, downloads and builds in parallel).

Both need the network (PyPI), so the figures include its speed on the day. It prints each
install's wall and CPU seconds, the medians and the ratio uv/pip; the last line is JSON.

    python benchmarks/install_time.py --rounds 2
    python benchmarks/install_time.py --dry-run        # what it would run, installing nothing
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commands(tool: str, venv: Path) -> list[list[str]]:
    py = str(venv / "bin" / "python")
    if tool == "pip":
        return [[py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                [py, "-m", "pip", "install", "--quiet", "-e", ".[test]"]]
    return [[py, "-m", "pip", "install", "--quiet", "uv"],
            [str(venv / "bin" / "uv"), "pip", "install", "--quiet", "--python", py, "--compile-bytecode",
             "-e", ".[test]"]]


def install(tool: str, python: str) -> tuple[float, float]:
    """One install from nothing in a clone of this checkout: (wall seconds, CPU seconds of it all)."""
    with tempfile.TemporaryDirectory(prefix=f"ssbench-install-{tool}-") as tmp:
        clone, cache = Path(tmp) / "clone", Path(tmp) / "cache"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        env = {**os.environ, "PIP_CACHE_DIR": str(cache / "pip"), "UV_CACHE_DIR": str(cache / "uv")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run([python, "-m", "venv", str(clone / ".venv")], check=True)
        for cmd in commands(tool, clone / ".venv"):
            subprocess.run(cmd, cwd=clone, env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        shutil.rmtree(clone, ignore_errors=True)
        return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--python", default=sys.executable if sys.prefix == sys.base_prefix else "python3",
                    help="the interpreter the venvs are made from (default: this one, or python3 in a venv)")
    ap.add_argument("--dry-run", action="store_true",
                    help="print each round's installs, in order, with their commands, and install nothing")
    args = ap.parse_args(argv)
    if args.dry_run:
        venv = Path("<clone>/.venv")
        order = [("pip", "uv") if r % 2 == 0 else ("uv", "pip") for r in range(args.rounds)]
        for r, tools in enumerate(order):
            for tool in tools:
                print(f"round {r + 1} {tool:3s}: " + " && ".join(" ".join(c) for c in commands(tool, venv)))
        print(json.dumps({"rounds": args.rounds, "dry_run": True, "order": order,
                          "commands": {t: commands(t, venv) for t in ("pip", "uv")}}))
        return 0
    got: dict[str, list[tuple[float, float]]] = {"pip": [], "uv": []}
    for r in range(args.rounds):
        for tool in (("pip", "uv") if r % 2 == 0 else ("uv", "pip")):
            wall, cpu = install(tool, args.python)
            got[tool].append((wall, cpu))
            print(f"round {r + 1} {tool:3s}: {wall:6.1f} s wall, {cpu:6.1f} CPU-s", flush=True)
    med = {t: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for t, v in got.items()}
    for t, (w, c) in med.items():
        spread = [w for w, _ in got[t]]
        print(f"{t:3s}: median {w:6.1f} s wall (range {min(spread):.1f} to {max(spread):.1f}), {c:6.1f} CPU-s")
    print(f"uv/pip: wall {med['uv'][0] / med['pip'][0]:.2f}, CPU {med['uv'][1] / med['pip'][1]:.2f}")
    print(json.dumps({"rounds": args.rounds, "runs": got,
                      "median": {t: {"wall_s": round(w, 1), "cpu_s": round(c, 1)} for t, (w, c) in med.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
