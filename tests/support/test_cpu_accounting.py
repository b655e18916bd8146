"""tests/support/cpu_accounting.py: a test's CPU is everything it started, and only that. A
pytest run of its own (a subprocess) on two modules, one burning a second of CPU in a child
process, one sleeping a second."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support import cpu_accounting, machine

pytestmark = pytest.mark.skipif(not cpu_accounting.available(), reason="no cgroup this process may create")

BURN = '''
import subprocess, sys
def test_burn():
    code = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.0: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
'''
SLEEP = '''
import time
def test_sleep():
    time.sleep(1.0)
'''


def _pytest(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """A pytest run of its own on the test files in ``tmp_path``, with this plugin and ``args``."""
    support = Path(cpu_accounting.__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
                        "-p", "support.cpu_accounting", "--rootdir", str(tmp_path), "-c", "/dev/null",
                        "--durations=1", str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**__import__("os").environ, "PYTHONPATH": str(support)})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


def test_a_child_processes_cpu_counts_and_a_sleep_does_not(tmp_path):
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "test_sleep.py").write_text(SLEEP)
    r = _pytest(tmp_path, "-p", "no:xdist")
    got = {m.group(2): float(m.group(1)) for m in re.finditer(r"^\s*([\d.]+)s\s+[\d.]+ %\s+(\S+)$", r.stdout, re.M)}
    # the modules, then the tests in them (the same figures: one test a module)
    assert set(got) == {"test_burn.py", "test_sleep.py", "test_burn.py::test_burn", "test_sleep.py::test_sleep"}, r.stdout
    for name in ("test_burn.py", "test_burn.py::test_burn"):
        assert 0.9 <= got[name] < 3.0, got
    for name in ("test_sleep.py", "test_sleep.py::test_sleep"):
        assert got[name] < 0.3, got
    assert r.stdout.index("test_burn.py::test_burn") > r.stdout.index("heaviest tests"), r.stdout


def test_each_xdist_workers_span_is_printed(tmp_path):
    """With xdist, the controller prints when each worker's tests started and ended: a worker
    that ends long before the others left a core idle (the part's critical path)."""
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "test_sleep.py").write_text(SLEEP)
    r = _pytest(tmp_path, "-n", "2", "--dist", "loadscope")
    spans = {m.group(1): (float(m.group(2)), float(m.group(3)), float(m.group(4))) for m in re.finditer(
        r"^\s+(gw\d): +([\d.]+) to +([\d.]+), tests' wall time +([\d.]+)$", r.stdout, re.M)}
    assert set(spans) == {"gw0", "gw1"}, r.stdout
    assert min(first for first, _, _ in spans.values()) == 0.0
    for first, last, busy in spans.values():
        assert 0.9 <= busy <= last - first + 0.1, spans     # each worker ran one test of ≥ 1 s


def test_the_machines_speed_is_probed_through_the_run(tmp_path):
    """The controller times a fixed loop every 2 s and prints the median, with the CPUs and any
    quota: a run of 5 s has probes."""
    (tmp_path / "test_sleep5.py").write_text("import time\ndef test_sleep():\n    time.sleep(5.0)\n")
    r = _pytest(tmp_path, "-p", "no:xdist")
    m = re.search(r"CPU speed probe: a fixed loop took ([\d.]+) ms of CPU \(median of (\d+); p10 ([\d.]+), "
                  r"p90 ([\d.]+)\): .*; (\d+) CPUs, (no CPU quota|a quota of [\d.]+ CPU)", r.stdout)
    assert m, r.stdout
    med, n, p10, p90 = float(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))
    assert n >= 2 and 0 < p10 <= med <= p90 < 1000, m.group(0)
    assert int(m.group(5)) == machine.cpus()


def test_a_quota_is_read_where_tools_slow_machine_sets_one(tmp_path):
    """tools/slow-machine runs a command under a CPU quota: the machine's line names it, and the
    time bounds the tests stretch to the machine (support.machine.allowance) grow by the share
    of CPUs taken away (2 CPUs' reference against half a CPU: at least 4 times)."""
    slow = Path(__file__).resolve().parents[2] / "tools" / "slow-machine"
    code = (f"import sys; sys.path.insert(0, {str(Path(machine.__file__).parents[1])!r}); "
            "from support import machine; print(machine.allowance(1.0))")
    r = subprocess.run([sys.executable, str(slow), "--cpus", "0.5", "--", "sh", "-c",
                        f"{sys.executable} {machine.__file__} && {sys.executable} -c \"{code}\""],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 2 and "no CPU quota can be set here" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    assert "a quota of 0.5 CPU" in r.stdout, r.stdout
    assert "under 0.5 of" in r.stderr and "left in place" not in r.stderr, r.stderr
    stretched = float(r.stdout.strip().splitlines()[-1])
    assert stretched >= max(1.0, machine.REFERENCE_CPUS / 0.5), r.stdout
    assert machine.allowance(1.0) >= 1.0
