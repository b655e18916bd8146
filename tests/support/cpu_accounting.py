"""Where the suite's CPU goes (a pytest plugin, loaded by tests/conftest.py): on a 2-core
machine ``make test`` is bound by CPU, not by waiting, so the slowest tests in wall time are not
necessarily the ones to make cheaper.

With ``--durations`` and a cgroup this process may create (cgroup v1 ``cpuacct`` or v2, as
root), each process that runs tests (every xdist worker) moves into a cgroup of its own before
its first test. Everything a test starts stays in it (servers started with ``pg_ctl``, JVMs,
Locust processes), so the cgroup's CPU counter read before and after each test (set-up, call
and tear-down) is that test's CPU, the machine's other processes excluded. xdist's controller
adds up what the workers hand over and prints the heaviest modules and tests. Without a writable cgroup
(not root, another OS) nothing is measured and nothing is printed.

A module-scoped fixture's CPU counts towards the test that set it up; a server that outlives a
test (the worker's own PostgreSQL) charges its background work to whichever test runs."""

from __future__ import annotations

import atexit
import os
import threading
import time
from pathlib import Path

import pytest

from harness import cgroups

from . import machine

SHOWN = 20
SHOWN_TESTS = 30


def roots() -> list[tuple[Path, str]]:
    """Where this process may count CPU: (its own cgroup in a hierarchy, the counter's file),
    v1's cpuacct first. Its own, not the hierarchy's root: a group made there stays under any
    CPU quota set above this process (tools/slow-machine)."""
    return ([(d, "cpuacct.usage") for _, d in cgroups.cgroup_dirs("cpuacct")]
            + [(d, "cpu.stat") for _, d in cgroups.cgroup_dirs("", "cgroup2")])


def available() -> bool:
    """Whether this process could measure its tests (a cgroup hierarchy it may write)."""
    return any((r / usage).exists() and os.access(r, os.W_OK) for r, usage in roots())


class CpuGroup:
    """A cgroup of its own, whose CPU counter covers every process in it and all they start
    (also used by benchmarks/analysis_time.py)."""

    PREFIX = "ssbench-"

    def __init__(self, path: Path, usage: str, parent: Path):
        self.path, self.usage, self.parent = path, usage, parent

    @classmethod
    def create(cls, name: str) -> "CpuGroup | None":
        """A new group ``ssbench-<name>`` in the first hierarchy this process may write (None:
        none). Empty groups left by processes that are gone (a killed run) are removed first."""
        for root, usage in roots():
            if not (root / usage).exists() or not os.access(root, os.W_OK):
                continue
            for stale in root.glob(f"{cls.PREFIX}*-[0-9]*"):
                pid = stale.name.rsplit("-", 1)[1]
                if not Path(f"/proc/{pid}").exists():
                    try:
                        stale.rmdir()
                    except OSError:
                        pass
            path = root / f"{cls.PREFIX}{name}"
            try:
                path.mkdir(exist_ok=True)
            except OSError:
                continue
            return cls(path, usage, root)
        return None

    def join(self, pid: int) -> bool:
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False

    def seconds(self) -> float:
        text = (self.path / self.usage).read_text()
        if self.usage == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6

    def empty(self) -> bool:
        return not (self.path / "cgroup.procs").read_text().split()

    def remove(self, wait: float = 0.0) -> bool:
        """Move this process back to the parent and remove the group once nothing is left in it
        (waiting up to ``wait`` seconds for what is still there)."""
        try:
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass
        deadline = time.monotonic() + wait
        while True:
            try:
                self.path.rmdir()
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.1)


class SpeedProbe(threading.Thread):
    """The machine's CPU speed through the run: every :attr:`every` seconds, the CPU time of
    this thread for a fixed empty loop (support.machine.probe_ms). On the 2-vCPU test VM the
    parallel part of nearly the same tests took 1,202 CPU-s in one run and 1,544 in another;
    the probe's median lets two runs' CPU seconds be compared."""

    def __init__(self, every: float = 2.0):
        super().__init__(name="ssbench-test-speed-probe", daemon=True)
        self.every, self.ms, self._halt = every, [], threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every):
            self.ms.append(machine.probe_ms())

    def stop(self) -> list[float]:
        self._halt.set()
        return sorted(self.ms)


def pytest_addoption(parser):
    parser.addoption("--ssbench-cpu-out", default=None, metavar="FILE",
                     help="with --durations, write every test module's and test's CPU seconds as JSON "
                          "(each part adds its own: 'parallel', 'alone'...)")


def pytest_configure(config):
    config._ssbench_speed = None
    if config.getoption("durations", None) is not None and not hasattr(config, "workerinput"):
        config._ssbench_speed = SpeedProbe()     # the controller, or the one process
        config._ssbench_speed.start()
    config._ssbench_cpu = {}
    config._ssbench_cpu_tests = {}
    config._ssbench_cpu_group = None
    config._ssbench_spans = {}      # xdist worker -> (first test's start, last test's end, tests' wall)
    if config.getoption("durations", None) is None or not hasattr(os, "getpid"):
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return      # xdist's controller runs no test: its workers measure theirs
    group = CpuGroup.create(f"tests-{os.getpid()}")
    if group is not None and not group.join(os.getpid()):
        group.remove()
        group = None
    if group is not None:
        atexit.register(group.remove, 5.0)      # if pytest_unconfigure could not
    config._ssbench_cpu_group = group


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Last, after tests/conftest.py has stopped this process's server (which is in the group)."""
    group = getattr(config, "_ssbench_cpu_group", None)
    if group is not None and group.remove(2.0):
        atexit.unregister(group.remove)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    group = item.config._ssbench_cpu_group
    if group is None:
        yield
        return
    before, started = group.seconds(), time.time()
    yield
    first, _, busy = item.config._ssbench_spans.get("self", (started, 0.0, 0.0))
    item.config._ssbench_spans["self"] = (first, time.time(), busy + time.time() - started)
    spent = group.seconds() - before
    module = item.nodeid.split("::", 1)[0]
    item.config._ssbench_cpu[module] = item.config._ssbench_cpu.get(module, 0.0) + spent
    item.config._ssbench_cpu_tests[item.nodeid] = spent


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    config = session.config
    if hasattr(config, "workerinput") and config._ssbench_cpu:
        config.workeroutput["ssbench_cpu"] = config._ssbench_cpu
        every = config.getoption("--ssbench-cpu-out") is not None
        config.workeroutput["ssbench_cpu_tests"] = dict(
            sorted(config._ssbench_cpu_tests.items(), key=lambda kv: -kv[1])[:None if every else SHOWN_TESTS])
        if "self" in config._ssbench_spans:
            config.workeroutput["ssbench_span"] = config._ssbench_spans["self"]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", {})
    for module, secs in output.get("ssbench_cpu", {}).items():
        node.config._ssbench_cpu[module] = node.config._ssbench_cpu.get(module, 0.0) + secs
    node.config._ssbench_cpu_tests.update(output.get("ssbench_cpu_tests", {}))
    if "ssbench_span" in output:
        node.config._ssbench_spans[node.gateway.id] = tuple(output["ssbench_span"])


def pytest_terminal_summary(terminalreporter, config):
    probe = getattr(config, "_ssbench_speed", None)
    if probe is not None:
        ms = probe.stop()
        if ms:
            terminalreporter.write_line(f"CPU speed probe: {machine.describe(ms)}")
    cpu = config._ssbench_cpu
    if not cpu:
        return
    _write_json(config)
    total = sum(cpu.values()) or 1e-9      # a run too short to be counted (no division by 0)
    terminalreporter.write_sep("=", f"CPU seconds per test module, everything its tests started "
                                    f"({total:.0f} s in all; the {min(SHOWN, len(cpu))} heaviest)")
    for module, secs in sorted(cpu.items(), key=lambda kv: -kv[1])[:SHOWN]:
        terminalreporter.write_line(f"{secs:8.1f}s {100 * secs / total:5.1f} %  {module}")
    tests = sorted(config._ssbench_cpu_tests.items(), key=lambda kv: -kv[1])[:SHOWN_TESTS]
    terminalreporter.write_sep("-", f"the {len(tests)} heaviest tests (set-up, call and tear-down)")
    for nodeid, secs in tests:
        terminalreporter.write_line(f"{secs:8.1f}s {100 * secs / total:5.1f} %  {nodeid}")
    spans = {k: v for k, v in config._ssbench_spans.items() if k != "self"}
    if spans:
        # the part's critical path: a worker that ends long before the last one left a core idle
        t0 = min(first for first, _, _ in spans.values())
        terminalreporter.write_sep("-", "xdist workers: their tests' span from the first test's start (s)")
        for worker, (first, last, busy) in sorted(spans.items(), key=lambda kv: kv[1][1]):
            terminalreporter.write_line(f"  {worker}: {first - t0:6.1f} to {last - t0:6.1f}, "
                                        f"tests' wall time {busy:6.1f}")


def _write_json(config) -> None:
    """``--ssbench-cpu-out``: this part's CPU seconds per module and per test, added to the file
    under the part's name (make test's two parts write in turn)."""
    import json

    out = config.getoption("--ssbench-cpu-out")
    if not out:
        return
    try:
        doc = json.loads(Path(out).read_text())
    except (OSError, ValueError):
        doc = {}
    part = config.getoption("--ssbench-part", None) or "all"
    doc[part] = {"total": round(sum(config._ssbench_cpu.values()), 1),
                 "modules": {k: round(v, 2) for k, v in sorted(config._ssbench_cpu.items(), key=lambda kv: -kv[1])},
                 "tests": {k: round(v, 2) for k, v in sorted(config._ssbench_cpu_tests.items(), key=lambda kv: -kv[1])}}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
