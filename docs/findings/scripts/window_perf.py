#!/usr/bin/env python
"""Where a slow window's CPU goes: perf samples per message, by function, slow windows against
fast ones (issue 24; not a test).

Run by hand beside ``ssbench run`` on the embedded target, with ``perf`` (Debian's
``linux-perf``) and ``docs/findings/scripts/window_internals.py sample`` (it records each process's class:
the senders', readers' and transport's backends by application name, autovacuum, Locust, the
broker), then join:

    perf record -a -F 297 -k CLOCK_REALTIME -o /tmp/w.data -- sleep 100000 &
    .venv/bin/python docs/findings/scripts/window_internals.py sample /tmp/wi.jsonl &
    .venv/bin/ssbench run MATRIX --out /tmp/w-run; kill -INT %1; kill %2
    .venv/bin/python docs/findings/scripts/window_perf.py /tmp/w-run /tmp/w.data /tmp/wi.jsonl

For each window of one dialog strategy (``--dialogs``, default per_thread; an alternated
window's members share it) it prints the strategy's receive rate, the window's messages (every
member's) and its perf samples per process class. Then, for one class (``--role``, default the
senders' backends), the slowest third of the windows against the fastest third: samples per
message in all, and per function (``--top`` of them, by the difference), with their ratio. The
same CPU share doing less work shows as more samples per message; a cost that grows with the
message count stays level.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from window_internals import strategy_summaries, window_messages  # noqa: E402  (the sampler's companion script)

#: ``perf script -F comm,pid,time,ip,sym,dso``: "comm pid time: ip sym (dso)"
LINE = re.compile(r"^\s*(.*?)\s+(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(\S+)\s+\((.*)\)\s*$")


def windows(run: Path, dialogs: str) -> list[dict]:
    """The measured windows of ``dialogs``: start, end, its receive rate, every member's messages."""
    out = []
    for f, s in strategy_summaries(run, dialogs):
        w = s["window"]
        out.append({"rep": s["repetition"], "start": w["measure_start"], "end": w["measure_end"],
                    "rate": s["receive_rate"], "msgs": window_messages(f, s), "classes": collections.Counter(),
                    "symbols": collections.Counter()})
    if not out:
        raise SystemExit(f"no repetition of dialogs={dialogs} in {run}")
    return sorted(out, key=lambda w: w["start"])


def roles(samples: Path) -> dict[int, tuple[list[float], list[str]]]:
    """pid -> (times, classes): each process's class as window_internals.py recorded it."""
    out: dict[int, tuple[list[float], list[str]]] = {}
    for line in samples.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            for pid, cls in (r.get("roles") or {}).items():
                ts, cs = out.setdefault(int(pid), ([], []))
                ts.append(r["t"])
                cs.append(cls)
    return out


def role_at(known: dict, pid: int, t: float, comm: str) -> str:
    if pid not in known:
        return comm
    ts, cs = known[pid]
    return cs[max(bisect.bisect_right(ts, t) - 1, 0)]


def join(perf_data: Path, wins: list[dict], known: dict, role: str) -> None:
    starts = [w["start"] for w in wins]
    p = subprocess.Popen(["perf", "script", "-i", str(perf_data), "-F", "comm,pid,time,ip,sym,dso"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, t, sym, dso = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or t >= wins[i]["end"]:
            continue
        cls = role_at(known, pid, t, comm)
        wins[i]["classes"][cls] += 1
        if cls == role:
            wins[i]["symbols"][("[k] " if "kernel" in dso else "") + sym] += 1
    p.wait()


def report(wins: list[dict], role: str, top: int) -> None:
    classes = sorted({c for w in wins for c in w["classes"]}, key=lambda c: -sum(w["classes"][c] for w in wins))[:6]
    print("rep    rate  messages  |  perf samples: " + "  ".join(classes))
    for w in sorted(wins, key=lambda w: w["rate"]):
        print(f"{w['rep']:3d} {w['rate']:7.0f} {w['msgs']:9.0f}  |                " +
              "  ".join(f"{w['classes'][c]:{len(c)}d}" for c in classes))
    ordered = sorted(wins, key=lambda w: w["rate"])
    k = max(1, len(ordered) // 3)
    slow, fast = ordered[:k], ordered[-k:]

    def per_message(group):
        c = collections.Counter()
        for w in group:
            c.update(w["symbols"])
        n = max(sum(w["msgs"] for w in group), 1.0)
        return {s: v / n for s, v in c.items()}, sum(c.values()) / n

    s_sym, s_all = per_message(slow)
    f_sym, f_all = per_message(fast)
    print(f"\n{role}: slowest {k} windows (reps {', '.join(str(w['rep']) for w in slow)}) against the fastest "
          f"{k} ({', '.join(str(w['rep']) for w in fast)})")
    print(f"samples per 1,000 messages: {1000 * s_all:.1f} against {1000 * f_all:.1f} "
          f"(x{s_all / f_all if f_all else float('nan'):.2f})")
    rows = sorted(set(s_sym) | set(f_sym), key=lambda s: -(s_sym.get(s, 0) - f_sym.get(s, 0)))[:top]
    print(f"{'function':48s} {'slow':>7s} {'fast':>7s}  ratio   (samples per 1,000 messages)")
    for s in rows:
        a, b = 1000 * s_sym.get(s, 0), 1000 * f_sym.get(s, 0)
        print(f"{s[:48]:48s} {a:7.2f} {b:7.2f}  {a / b if b else float('inf'):5.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the run's directory")
    ap.add_argument("perf_data", type=Path, help="perf record's output (-k CLOCK_REALTIME)")
    ap.add_argument("samples", type=Path, help="window_internals.py sample's output")
    ap.add_argument("--dialogs", default="per_thread")
    ap.add_argument("--role", default="pg ssbench-sender-i", help="the process class whose functions are compared")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    wins = windows(args.run, args.dialogs)
    join(args.perf_data, wins, roles(args.samples), args.role)
    report(wins, args.role, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
