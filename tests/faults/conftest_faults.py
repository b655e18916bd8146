"""Fault injection on the embedded target: real processes, real signals, a real PostgreSQL
crash, a real full filesystem. Every message a SEND committed is counted in the databases
themselves, independently of the run's own account, which must match it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


def ssbench_popen(*args, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def ssbench(*args, timeout=600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, **kw)


#: SENDs per second per initiator: a fault needs messages in flight, not a saturated server. Open
#: loop at 200/s took 9.4-9.5 CPU-s for a 1 s warm-up and a 6 s window (1 initiator, 2
#: threads), closed loop 16.2-16.6 (measured side by side, alternated): a closed loop takes both
#: cores for its whole window, CPU every other test of the parallel part waits for. Most of what
#: is left is each run's fixed cost (about 4 CPU-s: its processes' start, the databases).
FAULT_RATE = 50


def write_matrix(tmp_path: Path, name="fault", initiators=1, threads=2, measure=6, warmup=1,
                 drain=30, extra_run="", rate: int | None = FAULT_RATE, dialogs="per_thread",
                 server="durable", waitfor_ms=300) -> Path:
    """A one-permutation matrix, open loop at ``rate`` SENDs/s per initiator (None: closed loop)."""
    p = tmp_path / f"{name}.yaml"
    rate_axis = "" if rate is None else f"  rate: [{rate}]\n"
    p.write_text(f"""\
name: {name}
axes:
  initiators: [{initiators}]
  threads: [{threads}]
  dialogs: [{dialogs}]
  payload_bytes: [100]
  server: [{server}]
{rate_axis}run:
  warmup_seconds: {warmup}
  measure_seconds: {measure}
  repetitions: 1
  drain_timeout_seconds: {drain}
  sample_interval_seconds: 0.25
{extra_run}broker:
  max_queue_readers: 2
  receive_top: 10000
  waitfor_timeout_ms: {waitfor_ms}
  monitor_interval_seconds: 0.2
""")
    return p


def wait_for(stream_lines: list[str], proc: subprocess.Popen, needle: str, timeout: float) -> bool:
    """Read proc's stderr line by line into stream_lines until a line contains needle."""
    import selectors

    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            stream_lines.extend(proc.stderr.readlines())
            return any(needle in line for line in stream_lines)
        for _ in sel.select(timeout=0.2):
            line = proc.stderr.readline()
            if line:
                stream_lines.append(line)
                if needle in line:
                    return True
    return False


def start_run(matrix: Path, out: Path, needle: str = ": running", sending: int = 1, resume: bool = False):
    """Start ``ssbench run`` (``--resume``: of ``out``) and return (process, stderr lines so
    far) once it is ``needle`` and ``sending`` SENDs of the window have committed (0: at once):
    the users SEND, well inside the measured window (a condition, not a time: a slow host waits
    longer, a fast one no longer than it needs)."""
    p = ssbench_popen("run", str(matrix), "--out", str(out), *(("--resume",) if resume else ()))
    lines: list[str] = []
    assert wait_for(lines, p, needle, 120), "".join(lines)
    if sending:
        sent(sending, p)
    return p, lines


def sent(n: int, run: subprocess.Popen | None = None, timeout: float = 120) -> None:
    """Return once ``n`` SENDs beyond the dialogs' warm-up (each dialog's first message) have
    committed on initiator 1 of this process's embedded server (the databases the repetition
    reset before it said it is running); fails when ``run`` ends first."""
    import psycopg

    from harness.targets.embedded.target import EmbeddedTarget

    t = EmbeddedTarget()
    try:
        with psycopg.connect(t.conninfo(t.initiator_db(1)), autocommit=True) as c:
            deadline = time.monotonic() + timeout
            while c.execute("SELECT coalesce(sum(send_seq) - count(*), 0) FROM ssb.sysdesend").fetchone()[0] < n:
                assert run is None or run.poll() is None, f"the run ended before {n} SENDs:\n" + run.stderr.read()
                assert time.monotonic() < deadline, f"fewer than {n} SENDs in {timeout} s"
                time.sleep(0.1)
    finally:
        t.close()


def finish(p: subprocess.Popen, lines: list[str], timeout: float = 300) -> str:
    """Wait for the run; its whole stderr."""
    p.wait(timeout=timeout)
    return "".join(lines) + p.stderr.read()


def locust_processes(marker: str) -> list[psutil.Process]:
    """Locust processes of a run: their output goes to a log in the run directory ``marker``
    (no environment variable or command line names the run: the spec travels in messages)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            stdout = os.readlink(f"/proc/{p.pid}/fd/1")
        except (psutil.Error, OSError):
            continue
        if "locust" in cmd and stdout.startswith(marker):
            out.append(p)
    return out


@dataclass
class Audit:
    """What the databases hold, counted without ssbench's accounting code. A message is its
    (dialog, sequence number); the fault tests' dialogs are never ended, so every sequence
    number from 1 to a dialog's last was a data message (its first, the warm-up)."""

    expected: int = 0          # user messages whose SEND committed (sequence numbers per dialog)
    warmup: int = 0
    delivered: int = 0         # in the drop table (at least once)
    queued: int = 0            # still in a transmission queue or the target queue
    poison: int = 0
    missing: int = 0           # sent, found nowhere
    duplicates: int = 0        # copies beyond a message's first
    phantoms: int = 0          # measured messages the target holds that no dialog sent
    #: initiator -> {"missing", "duplicates", "phantoms"}
    per_initiator: dict = field(default_factory=dict)

    @property
    def delivered_not_warmup(self) -> int:
        return self.delivered - self.warmup

    def of(self, initiator: int, what: str) -> int:
        return self.per_initiator.get(initiator, {}).get(what, 0)


def audit(initiators: int) -> Audit:
    """Every (dialog, sequence number) a SEND committed on each initiator must be found exactly
    once: processed (drop table), poison (error table) or still queued; and nothing else found."""
    import psycopg

    from harness.targets.embedded.target import EmbeddedTarget

    t = EmbeddedTarget()
    a = Audit()
    found: dict = {}     # (dialog, seq) -> [copies, initiator, warm-up]
    try:
        with psycopg.connect(t.conninfo(t.target_db), autocommit=True) as tc:
            drop = Counter()
            warm = set()
            for diag, seq, n, w, i in tc.execute("SELECT diag_id, msgseqnum, count(*), bool_or(warmup), "
                                                 "min(initiator) FROM ssb.message_drop GROUP BY 1, 2"):
                drop[(diag, seq)] = n
                found[(diag, seq)] = [n, i, w]
                if w:
                    warm.add((diag, seq))
            queued = Counter()
            for d, s, i in tc.execute("SELECT diag_id, msgseqnum, initiator FROM ssb.service_queue WHERE msgtype = 1"):
                queued[(d, s)] += 1
                found.setdefault((d, s), [0, i, False])[0] += 1
            poison = Counter()
            try:
                for d, s, i in tc.execute("SELECT diag_id, msgseqnum, initiator FROM ssb.message_errors"):
                    poison[(d, s)] += 1
                    found.setdefault((d, s), [0, i, False])[0] += 1
            except psycopg.Error:
                pass
        sent = set()
        for i in range(1, initiators + 1):
            mine = a.per_initiator.setdefault(i, {"missing": 0, "duplicates": 0, "phantoms": 0})
            with psycopg.connect(t.conninfo(t.initiator_db(i)), autocommit=True) as ic:
                dialogs = ic.execute("SELECT diag_id, send_seq FROM ssb.sysdesend").fetchall()
                for d, s in ic.execute("SELECT dlgid, msgseqnum FROM ssb.sysxmitqueue WHERE msgtype = 1"):
                    queued[(d, s)] += 1
            for diag, last in dialogs:
                for seq in range(1, last + 1):
                    key = (diag, seq)
                    sent.add(key)
                    a.expected += 1
                    n = drop.get(key, 0) + queued.get(key, 0) + poison.get(key, 0)
                    if n == 0:
                        a.missing += 1
                        mine["missing"] += 1
                    elif n > 1:
                        a.duplicates += n - 1
                        mine["duplicates"] += n - 1
                    if drop.get(key, 0):
                        a.delivered += 1
                        a.warmup += key in warm
                    a.queued += queued.get(key, 0)
                    a.poison += poison.get(key, 0)
        for key, (n, i, w) in found.items():
            if key not in sent and not w:
                a.phantoms += 1
                a.per_initiator.setdefault(i, {"missing": 0, "duplicates": 0, "phantoms": 0})["phantoms"] += 1
    finally:
        t.close()
    return a


def rep_summary(run: Path) -> dict:
    files = sorted(run.glob("*/rep-[0-9][0-9]/summary.json"))   # not a damaged one set aside
    assert len(files) == 1, files
    from support.summaries import read

    return read(files[0])


def count_figures(a: Audit, s: dict, figures, injected: Audit | None = None) -> None:
    """The fault suite's figures: messages lost, duplicated and never sent beyond what the test
    did to the databases itself (``injected``), and, per initiator, the losses the run reported
    that the audit found (false) and those the audit found missing that the run did not report
    (hidden)."""
    inj = injected or Audit()
    figures["messages lost"] += a.missing - inj.missing
    figures["duplicates"] += a.duplicates - inj.duplicates
    figures["phantoms"] += a.phantoms - inj.phantoms
    reported = {p["initiator"]: p["lost"] for p in s["per_initiator"]}
    for i in set(reported) | set(a.per_initiator):
        figures["false losses"] += max(0, reported.get(i, 0) - a.of(i, "missing"))
        figures["hidden losses"] += max(0, a.of(i, "missing") - reported.get(i, 0))


def check_account(run: Path, initiators: int, figures) -> Audit:
    """The committed repetition's account equals the databases' (no loss, no duplicate)."""
    a = audit(initiators)
    s = rep_summary(run)
    count_figures(a, s, figures)
    assert a.missing == 0 and a.duplicates == 0 and a.phantoms == 0, a
    assert a.queued == 0, f"the drain ended with {a.queued} messages still queued"
    assert s["messages_sent"] == a.expected - a.warmup, (s["messages_sent"], a)
    assert s["messages_received"] == a.delivered_not_warmup, (s["messages_received"], a)
    from harness.results import DISTURBED_STATUSES

    # the statuses a slow or busy host gives a healthy repetition count too (its open loop fell
    # behind its offered rate, the host's other processes took CPU): the account is what is judged
    assert s["messages_lost"] == 0 and s["status"] in ("ok", "noisy_host", "client_bound", "behind",
                                                       *DISTURBED_STATUSES), s
    perm = json.loads((run / s["permutation_id"] / "summary.json").read_text())
    record = json.loads((run / "run.json").read_text())
    assert perm["messages_lost"] == record["messages_lost"] == 0
    return a


@pytest.fixture
def fault(figures):
    """Count a fault injected; the test marks it survived by calling the returned function."""
    figures["faults injected"] += 1

    def survived():
        figures["faults survived"] += 1

    return survived


def can_mount_tmpfs(path) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ssbench-probe", str(path)],
                       capture_output=True)
    if r.returncode != 0:
        return False
    subprocess.run(["umount", str(path)], check=False)
    return True


def fill(mount, leave: int) -> None:
    """Fill the file system at ``mount`` up to ``leave`` bytes free (a real file of zeros)."""
    st = os.statvfs(mount)
    free = st.f_bavail * st.f_frsize
    with open(os.path.join(mount, "filler"), "wb") as f:
        f.write(b"\0" * max(0, free - leave))
        f.flush()
        os.fsync(f.fileno())


def broker_pids(parent_pid: int) -> list[int]:
    """The embedded broker process(es) started by the ssbench process ``parent_pid``."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "harness.targets.embedded.broker" in cmd and f"--parent-pid {parent_pid}" in cmd:
            out.append(p.pid)
    return out


__all__ = ["REPO", "Audit", "audit", "broker_pids", "can_mount_tmpfs", "check_account", "count_figures", "fill", "finish",
           "locust_processes", "rep_summary", "ssbench", "ssbench_popen", "sent", "start_run",
           "wait_for", "write_matrix"]
