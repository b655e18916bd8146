"""Where the suite's CPU goes (a pytest plugin, loaded by tests/conftest.py): on a 2-core
machine ``make test`` is bound by CPU, not by waiting, so the slowest tests in wall time are not
necessarily the ones to make cheaper.

With ``--durations`` and a cgroup this process may create (cgroup v1 ``cpuacct`` or v2, as
root), each process that runs tests (every xdist worker) moves into a cgroup of its own before
its first test. Everything a test starts stays in it (servers started with ``pg_ctl``, JVMs,
Locust processes), so the cgroup's CPU counter read before and after each test (set-up, call
and tear-down) is that test's CPU, the machine's other processes excluded. xdist's controller
adds up what the workers hand over and prints the heaviest modules. Without a writable cgroup
(not root, another OS) nothing is measured and nothing is printed.

A module-scoped fixture's CPU counts towards the test that set it up; a server that outlives a
test (the worker's own PostgreSQL) charges its background work to whichever test runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOTS = (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup"))
SHOWN = 20


def available() -> bool:
    """Whether this process could measure its tests (a cgroup hierarchy it may write)."""
    return any(((r / "cpuacct.usage").exists() or (r / "cpu.stat").exists()) and os.access(r, os.W_OK)
               for r in ROOTS)


class _Group:
    def __init__(self, path: Path, usage: str, parent: Path):
        self.path, self.usage, self.parent = path, usage, parent

    @classmethod
    def join_new(cls, name: str) -> "_Group | None":
        for root in ROOTS:
            usage = "cpuacct.usage" if (root / "cpuacct.usage").exists() else "cpu.stat"
            if not (root / usage).exists() or not os.access(root, os.W_OK):
                continue
            path = root / name
            try:
                path.mkdir(exist_ok=True)
                (path / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                try:
                    path.rmdir()
                except OSError:
                    pass
                continue
            return cls(path, usage, root)
        return None

    def seconds(self) -> float:
        text = (self.path / self.usage).read_text()
        if self.usage == "cpuacct.usage":
            return int(text) / 1e9
        return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6

    def leave(self) -> None:
        """Back to the parent; the group goes when nothing of this process is left in it."""
        try:
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
            self.path.rmdir()
        except OSError:
            pass


def pytest_configure(config):
    config._ssbench_cpu = {}
    config._ssbench_cpu_group = None
    if config.getoption("durations", None) is None or not hasattr(os, "getpid"):
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return      # xdist's controller runs no test: its workers measure theirs
    config._ssbench_cpu_group = _Group.join_new(f"ssbench-tests-{os.getpid()}")


def pytest_unconfigure(config):
    group = getattr(config, "_ssbench_cpu_group", None)
    if group is not None:
        group.leave()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    group = item.config._ssbench_cpu_group
    if group is None:
        yield
        return
    before = group.seconds()
    yield
    module = item.nodeid.split("::", 1)[0]
    item.config._ssbench_cpu[module] = item.config._ssbench_cpu.get(module, 0.0) + group.seconds() - before


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    config = session.config
    if hasattr(config, "workerinput") and config._ssbench_cpu:
        config.workeroutput["ssbench_cpu"] = config._ssbench_cpu


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for module, secs in getattr(node, "workeroutput", {}).get("ssbench_cpu", {}).items():
        node.config._ssbench_cpu[module] = node.config._ssbench_cpu.get(module, 0.0) + secs


def pytest_terminal_summary(terminalreporter, config):
    cpu = config._ssbench_cpu
    if not cpu:
        return
    total = sum(cpu.values())
    terminalreporter.write_sep("=", f"CPU seconds per test module, everything its tests started "
                                    f"({total:.0f} s in all; the {min(SHOWN, len(cpu))} heaviest)")
    for module, secs in sorted(cpu.items(), key=lambda kv: -kv[1])[:SHOWN]:
        terminalreporter.write_line(f"{secs:8.1f}s {100 * secs / total:5.1f} %  {module}")
