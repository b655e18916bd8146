"""Which tests start the real heavy parts (a Locust swarm, a Spark JVM, a headless browser) and
which part of ``make test`` they run in; loaded by tests/conftest.py.

A test *starts* a kind when its markers say so (``swarm``, ``spark``, ``browser``: on the test,
its class or its module) or a fixture it uses does (a fixture decorated with :func:`starts`, or
the in-process Spark session's ``spark``). Nobody can forget to say so: while a test runs, a
thread of its process watches the processes it starts, and a test that started a Locust
process, a Spark JVM or a Chromium it did not declare fails at its tear-down.

The rules, checked when the suite is collected (a broken rule refuses the whole run):

* a test that starts a swarm or a browser states whether its outcome depends on the host's
  speed or idle CPU: ``@pytest.mark.timing`` (a rate, a CPU share, a latency, a deadline, a
  diagnosis or a verdict from a real swarm: it runs in the alone part, where nothing else runs)
  or ``@pytest.mark.untimed("why not")`` (the parallel part may run it beside other tests);
* a test whose assertion compares a time it read from a clock (``took = time.monotonic() -
  t0; assert took < 10``) says the same, whatever it starts;
* ``timing`` puts a test in the alone part: no test so marked runs in the parallel part.

``--ssbench-parts-out FILE`` (with ``--collect-only``) writes the list of the tests that start
anything, with what they start and their part: tests/parts.txt, which tests/support/test_parts.py
keeps equal to the suite."""

from __future__ import annotations

import ast
import os
import re
import threading
import time
from pathlib import Path

import pytest

KINDS = ("swarm", "spark", "browser")
#: each kind as the messages name it
NOUNS = {"swarm": "Locust swarm", "spark": "Spark JVM", "browser": "headless browser"}
#: what a test must say when it starts one of these
DECLARE = ("swarm", "browser")
CLOCKS = frozenset({"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns",
                    "process_time", "thread_time"})
#: what a file says when it holds a test of the alone part (the alone parts collect no other file)
ALONE_TEXT = re.compile(r"\bmark\.(?:timing|alone)\b")
#: how often the watcher looks at the test's processes (a swarm, a JVM or a browser lives for seconds)
POLL_S = 0.5


def starts(*kinds: str):
    """Decorates a fixture (under ``@pytest.fixture``): every test that uses it starts ``kinds``."""
    bad = set(kinds) - set(KINDS)
    if bad:
        raise ValueError(f"starts(): unknown kind(s) {sorted(bad)}; one of {KINDS}")

    def mark(fn):
        fn._ssbench_starts = frozenset(kinds)
        return fn

    return mark


def pytest_addoption(parser):
    parser.addoption("--ssbench-parts-out", default=None, metavar="FILE",
                     help="write every collected test that starts a swarm, a Spark JVM or a browser, with "
                          "its part (tests/parts.txt is this list for the whole suite)")


# --------------------------------------------------------------------------- at collection

def _fixture_kinds(item) -> set[str]:
    out: set[str] = set()
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        for d in defs:
            out |= getattr(d.func, "_ssbench_starts", frozenset())
    if "spark" in getattr(item, "fixturenames", ()):
        out.add("spark")
    return out


def declared(item) -> set[str]:
    return {k for k in KINDS if item.get_closest_marker(k)} | _fixture_kinds(item)


def is_alone(item) -> bool:
    return item.get_closest_marker("alone") is not None or item.get_closest_marker("timing") is not None


class _Clocks:
    """What a test file says: its test functions' asserts that compare a time read from a clock,
    and whether it marks a test timing or alone."""

    def __init__(self):
        self._by_file: dict[str, dict[str, list[int]]] = {}
        self._says_alone: dict[str, bool] = {}

    def lines(self, item) -> list[int]:
        fn = getattr(item, "function", None)
        path = str(getattr(item, "path", ""))
        if fn is None or not path.endswith(".py"):
            return []
        if path not in self._by_file:
            try:
                text = Path(path).read_text()
                tree = ast.parse(text) if _CLOCK_TEXT.search(text) else ast.Module(body=[], type_ignores=[])
            except (OSError, SyntaxError):
                tree = ast.Module(body=[], type_ignores=[])
            self._by_file[path] = {n.name: _clock_asserts(n) for n in ast.walk(tree)
                                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")}
        return self._by_file[path].get(getattr(fn, "__name__", ""), [])


    def says_alone(self, item) -> bool:
        path = str(getattr(item, "path", ""))
        if path not in self._says_alone:
            try:
                self._says_alone[path] = bool(ALONE_TEXT.search(Path(path).read_text()))
            except OSError:
                self._says_alone[path] = False
        return self._says_alone[path]


#: a clock's call is written with one of these words (a file without any is not parsed: most are not)
_CLOCK_TEXT = re.compile(r"\b(?:%s)\b|\btime\s*\.\s*time\b" % "|".join(sorted(CLOCKS - {"time"})))


def _is_clock(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "time":
        return f.attr in CLOCKS
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


def _clock_asserts(fn: ast.AST) -> list[int]:
    """Line numbers of asserts comparing (<, <=, >, >=) a time: a clock reading, a name assigned
    from one, or arithmetic on them (``took = time.monotonic() - t0``; not a value a function
    computed from a clock reading it was given)."""
    tainted: set[str] = set()

    def timed(node) -> bool:
        if _is_clock(node) or (isinstance(node, ast.Name) and node.id in tainted):
            return True
        if isinstance(node, ast.BinOp):
            return timed(node.left) or timed(node.right)
        return isinstance(node, ast.UnaryOp) and timed(node.operand)

    changed = True
    while changed:      # a name assigned a time, or arithmetic on names that were
        changed = False
        for n in ast.walk(fn):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None and timed(n.value):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Name) and t.id not in tainted:
                        tainted.add(t.id)
                        changed = True
    out = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Assert) and any(
                isinstance(c, ast.Compare) and any(isinstance(o, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for o in c.ops)
                and any(timed(x) for x in (c.left, *c.comparators)) for c in ast.walk(n.test)):
            out.append(n.lineno)
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    check(config, items)


def check(config, items) -> None:
    """Mark each test with what its fixtures start; refuse the run when a rule is broken."""
    clocks = _Clocks()
    broken = []
    for item in items:
        kinds = declared(item)
        for k in kinds - {k for k in KINDS if item.get_closest_marker(k)}:
            item.add_marker(getattr(pytest.mark, k))
        timing, untimed = item.get_closest_marker("timing"), item.get_closest_marker("untimed")
        if is_alone(item) and not clocks.says_alone(item):
            broken.append(f"{item.nodeid}: runs alone, but its file does not write pytest.mark.timing or "
                          "pytest.mark.alone: the alone parts collect only the files that do")
        if timing and untimed:
            broken.append(f"{item.nodeid}: marked both timing and untimed")
        elif untimed and not (untimed.args and str(untimed.args[0]).strip()):
            broken.append(f"{item.nodeid}: untimed needs its reason, untimed('why no figure it asserts depends "
                          f"on the host's speed')")
        elif not (timing or untimed):
            need = sorted(kinds & set(DECLARE))
            if need:
                broken.append(f"{item.nodeid}: starts a {' and a '.join(need)}: mark it timing (it runs alone) or "
                              f"untimed('why its outcome does not depend on the host's speed')")
            lines = clocks.lines(item)
            if lines:
                broken.append(f"{item.nodeid}: asserts on a time read from a clock (line(s) "
                              f"{', '.join(map(str, lines))}): mark it timing (it runs alone) or untimed('why')")
    if broken:
        raise pytest.UsageError("tests/support/parts.py: a test must say whether its outcome depends on the "
                                "host's speed:\n  " + "\n  ".join(broken))
    config._ssbench_parts = (listing(items), {str(getattr(item, "path", "")) for item in items})
    out = config.getoption("--ssbench-parts-out")
    if out:
        Path(out).write_text(config._ssbench_parts[0])


def listing(items) -> str:
    """tests/parts.txt: every test that starts something, what it starts and its part."""
    rows = []
    for item in items:
        kinds = declared(item)
        if not kinds:
            continue
        part = "alone" if is_alone(item) else "parallel"
        why = "timing" if item.get_closest_marker("timing") else "untimed" if item.get_closest_marker("untimed") else "-"
        rows.append(f"{part:<9} {why:<8} {','.join(k for k in KINDS if k in kinds):<20} {item.nodeid}")
    head = ("# Every test that starts a Locust swarm, a Spark JVM (the in-process session included) or a headless\n"
            "# browser, and the part of make test it runs in (tests/support/parts.py; tests/support/test_parts.py\n"
            "# keeps this file equal to the suite). Written by:\n"
            "#   .venv/bin/python -m pytest --collect-only -q -p no:cacheprovider --ssbench-parts-out tests/parts.txt\n"
            f"# {len(rows)} tests: {sum(r.startswith('parallel') for r in rows)} parallel, "
            f"{sum(r.startswith('alone') for r in rows)} alone\n")
    return head + "".join(r + "\n" for r in sorted(rows, key=lambda r: (r.split()[0] != "parallel", r.split()[-1])))


# --------------------------------------------------------------------------- while a test runs

def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kind_of(cmdline: str) -> str | None:
    """The heavy part a process is, from its command line (None: none of them).
    $SSBENCH_TEST_PARTS_AS ('KIND=WORD') makes a process with WORD in its command line one of
    KIND too (tests/support/test_parts.py's stand-in for a swarm)."""
    kind, _, word = os.environ.get("SSBENCH_TEST_PARTS_AS", "").partition("=")
    if word and word in cmdline.split():
        return kind
    argv0 = cmdline.split(" ", 1)[0]
    if "locust" in cmdline.split():
        return "swarm"
    if "-m locust" in cmdline or "locustfile" in cmdline:
        return "swarm"
    if argv0.endswith("/java") or argv0 == "java":
        return "spark" if "spark" in cmdline else None
    if "chrom" in os.path.basename(argv0):
        return "browser"
    return None


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux's /proc/PID/task/TID/children)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


class Watcher(threading.Thread):
    """Sees the processes a test starts (the kinds of those not there when it began)."""

    def __init__(self):
        super().__init__(name="ssbench-test-parts-watcher", daemon=True)
        self._wake, self._lock = threading.Event(), threading.Lock()
        self.active, self.before, self.seen, self.kinds = False, set(), set(), set()

    def begin(self) -> None:
        with self._lock:
            self.before, self.seen, self.kinds, self.active = descendants(os.getpid()), set(), set(), True
        self._wake.set()

    def end(self) -> set[str]:
        self.look()
        with self._lock:
            self.active = False
            return set(self.kinds)

    def look(self) -> None:
        with self._lock:
            if not self.active:
                return
            # a process seen between its fork and its exec still has its parent's command
            # line: one not yet known as anything is looked at again at the next poll
            for pid in descendants(os.getpid()) - self.before - self.seen:
                k = kind_of(_cmdline(pid))
                if k:
                    self.kinds.add(k)
                    self.seen.add(pid)

    def run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self.active:
                self.look()
                time.sleep(POLL_S)


_WATCHER: Watcher | None = None


def _watcher() -> Watcher | None:
    global _WATCHER
    if _WATCHER is None and Path(f"/proc/{os.getpid()}/task").is_dir():
        _WATCHER = Watcher()
        _WATCHER.start()
    return _WATCHER


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    w = _watcher()
    if w is not None and not set(KINDS) <= declared(item):
        w.begin()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    res = yield
    w = _WATCHER
    if w is not None and w.active:
        undeclared = w.end() - declared(item)
        if undeclared:
            what = " and a ".join(NOUNS[k] for k in sorted(undeclared))
            pytest.fail(f"{item.nodeid} started a {what} without saying so: mark it "
                        f"{' and '.join(sorted(undeclared))} (and timing or untimed), or use a fixture that does "
                        "(tests/support/parts.py)", pytrace=False)
    return res
