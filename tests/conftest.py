"""Shared fixtures and the suite's plumbing. Servers are real: the embedded PostgreSQL runs from
a private data directory per test process (never the user's own ~/.cache/ssbench).

The suite runs in two parts (``make test``): the parallel part under pytest-xdist, one embedded
server and one Spark session per worker process, and then the tests marked ``alone`` (timing,
throughput ratios, CPU shares), one at a time
with nothing else running. ``--ssbench-part parallel|alone`` selects a part; without it every
test runs in one process. ``make test-fast`` (``--ssbench-part fast``, then ``fast-alone``) runs
the unit tests only: see ``NOT_FAST``. The slowest fixture set-ups are listed at the end of the run (``--durations``
lists the slowest tests), and, where a cgroup measures them, the modules that took the most CPU
(tests/support/cpu_accounting.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest_plugins = ["support.cpu_accounting", "support.parts"]

# pytest keeps each test module's compiled, assertion-rewritten code only where bytecode may be
# written; with PYTHONDONTWRITEBYTECODE set (as on the CI machines) every test process would
# rewrite and compile the whole suite again: 7.7 against 3.5 CPU-seconds of collection each.
# The suite's own processes keep it, like make bytecode keeps ssbench's (__pycache__ is ignored).
sys.dont_write_bytecode = False

#: fixtures that start (or point at) this process's embedded server; a test using one is marked ``server``
SERVER_FIXTURES = frozenset({"pg_server", "pg_data_dir", "private_server"})
#: ``make test-fast`` (``--ssbench-part fast``) leaves out the tests with any of these marks: the
#: unit tests are left (no server, no swarm, no Spark, no browser, no error-rate simulation)
NOT_FAST = ("slow", "simulation", "server", "spark", "browser", "e2e", "swarm")
#: fixture set-ups at least this long are listed in the terminal summary
SLOW_FIXTURE_S = 0.5
#: the xdist scope of every test that uses the in-process Spark session (the ``spark`` fixture):
#: they run on one worker, so the session (a JVM, about a gigabyte) is started once
SPARK_GROUP = "spark-session"
#: each test module's seconds in a parallel part (``--ssbench-durations-out``): the longest
#: modules start first, so the short ones fill the end instead of a long one trailing alone
DURATIONS = REPO / "tests" / "durations.json"


def pytest_addoption(parser):
    parser.addoption("--ssbench-durations-out", default=None, metavar="FILE",
                     help="write each test module's seconds in this run (set-up, call and tear-down "
                          "summed) as JSON: the order make test's parallel part starts modules in "
                          "comes from tests/durations.json, written this way")
    parser.addoption("--ssbench-part", choices=("parallel", "alone", "fast", "fast-alone"), default=None,
                     help="run only the tests that may run concurrently (parallel), only those marked "
                          "'alone' (make test runs both, one after the other), or only the unit tests "
                          f"(fast: none marked {', '.join(NOT_FAST)} or alone; fast-alone: those marked "
                          "alone among them; make test-fast runs both)")


# --------------------------------------------------------------------------- one server per process

def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def pytest_configure(config):
    from collections import Counter

    _THIS._config = config
    config._ssbench_module_seconds = {}
    config._ssbench_figures = Counter()
    config._ssbench_fixture_times = []
    config._ssbench_worker_lines = []
    _warm_spark_archive(config)
    if _xdist_controller(config):
        # the workers write which tests share a scope here; the scheduler reads it
        config._ssbench_groups = Path(tempfile.mkdtemp(prefix="ssbench-test-groups-"))
        os.environ["SSBENCH_TEST_GROUPS"] = str(config._ssbench_groups)
    else:
        # Every process that runs tests (each xdist worker, or the one process without xdist) gets
        # a data directory of its own before any test runs, so that a test which starts ``ssbench``
        # without asking for pg_server still never touches the default (shared) server. Not under
        # pytest's tmp_path when root: the server then runs as an unprivileged user, and every
        # pytest session of the machine resets /tmp/pytest-of-root to mode 0700 when it starts.
        base = Path(tempfile.mkdtemp(prefix=f"ssbench-test-{_worker()}-",
                                     dir="/var/tmp" if os.geteuid() == 0 else None))
        config._ssbench_pg_base = base
        config._ssbench_old_pgdata = os.environ.get("SSBENCH_PGDATA")
        os.environ["SSBENCH_PGDATA"] = str(base / "pg")


def _warm_spark_archive(config) -> None:
    """Before any test starts a JVM, the class-data-sharing archive of Spark's classes is
    written. Otherwise the first JVM of the run writes it when it exits: the in-process Spark
    session's, at the end of the parallel part, so every other JVM of the run would start
    without it (about 3.5 CPU-seconds more each). It is written by the first local analysis that
    tests/analysis/test_analysis_cluster.py checks (support.cds.share_first_analysis, kept in a
    directory of this run for its tests): a JVM that writes it takes about 50 CPU-seconds more
    than one that uses it, paid once a run instead of twice. When that analysis wrote none,
    harness.analysis.spark.write_archive's short job does."""
    if config.getoption("--ssbench-part") in ("fast", "fast-alone") or hasattr(config, "workerinput"):
        return
    from harness.analysis import spark

    if not spark.archive_missing():
        return
    from support import cds

    t0 = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="ssbench-test-first-analysis-", dir="/var/tmp" if os.geteuid() == 0 else None))
    config._ssbench_first_analysis = base
    os.environ[cds.SHARED_VAR] = str(base)      # the xdist workers inherit it
    try:
        path = cds.share_first_analysis(base)
    except Exception as e:          # the test that reads it says what went wrong
        print(f"the suite's first analysis failed: {e!r}", file=sys.stderr)
        path = None
    path = path or spark.write_archive()
    print(f"Spark class-data archive: {path or 'not written'} ({time.monotonic() - t0:.1f} s)", file=sys.stderr)


def _xdist_controller(config) -> bool:
    return getattr(config.option, "numprocesses", None) not in (None, 0) and not hasattr(config, "workerinput")


_THIS = sys.modules[__name__]


def pytest_unconfigure(config):
    if getattr(config, "_ssbench_groups", None) is not None:
        shutil.rmtree(config._ssbench_groups, ignore_errors=True)
        os.environ.pop("SSBENCH_TEST_GROUPS", None)
    if getattr(config, "_ssbench_first_analysis", None) is not None:
        shutil.rmtree(config._ssbench_first_analysis, ignore_errors=True)
        os.environ.pop("SSBENCH_TEST_FIRST_ANALYSIS", None)
    base = getattr(config, "_ssbench_pg_base", None)
    if base is None:
        return
    from harness.targets.embedded.server import EmbeddedServer

    if (base / "pg").exists():
        EmbeddedServer(base / "pg").destroy()
    shutil.rmtree(base, ignore_errors=True)
    old = config._ssbench_old_pgdata
    if old is None:
        os.environ.pop("SSBENCH_PGDATA", None)
    else:
        os.environ["SSBENCH_PGDATA"] = old


@pytest.fixture(scope="session")
def pg_data_dir(pytestconfig):
    """This process's embedded data directory ($SSBENCH_PGDATA for the whole session)."""
    return pytestconfig._ssbench_pg_base / "pg"


@pytest.fixture(scope="session")
def pg_server(pg_data_dir):
    """A running embedded PostgreSQL server (started once per test process)."""
    from harness.targets.embedded.server import EmbeddedServer

    srv = EmbeddedServer(pg_data_dir)
    srv.start()
    yield srv
    srv.stop(mode="immediate")    # no shutdown checkpoint: pytest_unconfigure deletes the data next


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for this test process, started on first use: every test that uses
    it runs on one xdist worker (SPARK_GROUP), so the suite starts one such JVM."""
    from harness.analysis.spark import get_spark

    s = get_spark("local[2]", app_name="ssbench-tests", shuffle_partitions=2, driver_memory="1g", input_bytes=0)
    yield s
    s.stop()


# --------------------------------------------------------------------------- markers and the two parts

def pytest_ignore_collect(collection_path, config):
    """The alone parts import only the test files that mark a test ``timing`` or ``alone`` (a
    sixth of them): collecting every file cost each about 5 s of its 20 on the 2-core VM.
    tests/support/parts.py refuses a test that runs alone from a file that does not say so."""
    from support.parts import ALONE_TEXT

    if (config.getoption("--ssbench-part") in ("alone", "fast-alone") and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and not ALONE_TEXT.search(collection_path.read_text())):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    """Mark what a test needs from its fixtures and folder (``server``, ``spark``, ``e2e``; what it
    starts and the rules about it: tests/support/parts.py, first); keep one part. In an xdist worker the long tests come first: the scheduler hands out modules in
    this order, so the longest start at once instead of trailing at the end."""
    e2e = REPO / "tests" / "e2e"
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)
        if "spark" in names:
            item.add_marker(pytest.mark.spark)
        if Path(str(item.path)).is_relative_to(e2e):
            item.add_marker(pytest.mark.e2e)
    if hasattr(config, "workerinput"):
        seconds = _module_seconds()
        # stable: collection order within a rank and module
        items.sort(key=lambda item: (_cost_rank(item), -seconds.get(_module(item), 0.0)))
        _write_groups(items)
    part = config.getoption("--ssbench-part")
    if part is None:
        return
    keep, drop = [], []
    for item in items:
        (keep if _in_part(item, part) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


def _module_seconds() -> dict[str, float]:
    """tests/durations.json's seconds per module ({} when absent or unreadable: collection order)."""
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text())["modules"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _cost_rank(item) -> int:
    """0: the Spark session's group (the largest unit); 1: other long tests; 2: unit tests."""
    if "spark" in getattr(item, "fixturenames", ()):
        return 0
    return 1 if any(item.get_closest_marker(m) for m in NOT_FAST) else 2


def _write_groups(items) -> None:
    """An xdist worker tells the scheduler (pytest_xdist_make_scheduler) which tests share a scope."""
    d = os.environ.get("SSBENCH_TEST_GROUPS")
    if not d:
        return
    groups = {item.nodeid: SPARK_GROUP for item in items if "spark" in item.fixturenames}
    tmp = Path(d) / f".{_worker()}.json.tmp"
    tmp.write_text(json.dumps(groups))
    os.replace(tmp, Path(d) / f"{_worker()}.json")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope``: one unit of work per test module (its module-scoped fixtures are set
    up once), except the tests of the Spark session, one unit whatever their modules. (xdist's
    ``loadgroup`` would do that from ``xdist_group`` marks by renaming the items, which pytest
    9.2 ignores: the workers write the groups to a file instead, see _write_groups.)"""
    if config.getvalue("dist") != "loadscope" or getattr(config, "_ssbench_groups", None) is None:
        return None
    from xdist.scheduler import LoadScopeScheduling

    groups_dir = config._ssbench_groups

    class SuiteScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:     # every worker collected (and wrote) before the first call
                files = sorted(groups_dir.glob("*.json"))
                self.groups = json.loads(files[0].read_text()) if files else {}
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return SuiteScheduling(config, log)


def _in_part(item, part: str) -> bool:
    from support.parts import is_alone

    alone = is_alone(item)
    if part in ("fast", "fast-alone"):
        return not any(item.get_closest_marker(m) for m in NOT_FAST) and alone == (part == "fast-alone")
    return alone == (part == "alone")


# --------------------------------------------------------------------------- what the run reports at its end

@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Time every set-up of a session-, package-, module- or class-scoped fixture (the server,
    the Spark session...): listed at the end of a run given ``--durations``."""
    t0 = time.perf_counter()
    yield
    if fixturedef.scope != "function":
        item = getattr(request, "_pyfuncitem", None)
        request.config._ssbench_fixture_times.append(
            (time.perf_counter() - t0, fixturedef.scope, fixturedef.argname, _worker(),
             item.nodeid if item is not None else "?"))


#: the fault suite's closing line: messages lost, duplicated or never sent (phantoms) beyond what a
#: test did to the databases itself, and losses the run reported that the databases hold (false)
#: or that the databases miss and the run did not report (hidden): all 0 when every fault is survived
FIGURE_KEYS = ("faults injected", "faults survived", "messages lost", "duplicates", "phantoms",
               "false losses", "hidden losses", "bad inputs tried", "bad inputs clean")


@pytest.fixture
def figures(request):
    """Counters the fault-injection and bad-input suites add to; printed as one line at the end."""
    return request.config._ssbench_figures


class _Lines:
    """Stands in for the terminal reporter of an xdist worker: keeps what the other conftests'
    ``pytest_terminal_summary`` write (e.g. the T-SQL parser check's figures line)."""

    def __init__(self):
        self.lines: list[str] = []

    def write_line(self, line, **kw):
        self.lines.append(str(line))

    def write_sep(self, sep, title="", **kw):
        self.lines.append(f"{sep * 10} {title} {sep * 10}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """A part with no test in it (e.g. ``make test PYTEST_ARGS=tests/results``: nothing there runs
    alone) is not a failure. An xdist worker hands the controller its figures, its fixture times
    and its conftests' summary lines (the controller prints them: a worker's terminal is not shown)."""
    config = session.config
    if config.getoption("--ssbench-part") and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
    if not hasattr(config, "workerinput"):
        return
    out = _Lines()
    for impl in config.hook.pytest_terminal_summary.get_hookimpls():
        if impl.plugin is not _THIS and Path(str(impl.plugin_name)).name == "conftest.py":
            kw = {"terminalreporter": out, "exitstatus": exitstatus, "config": config}
            impl.function(**{k: kw[k] for k in impl.argnames})
    config.workeroutput["ssbench"] = {"figures": dict(config._ssbench_figures),
                                      "fixture_times": config._ssbench_fixture_times,
                                      "lines": out.lines}


def pytest_runtest_logreport(report):
    """``--ssbench-durations-out``: add up each module's set-up, call and tear-down (in the
    process that reports: the xdist controller, or the one process)."""
    cfg = getattr(_THIS, "_config", None)
    if cfg is not None and cfg.getoption("--ssbench-durations-out") and not hasattr(cfg, "workerinput"):
        mod = report.nodeid.split("::", 1)[0]
        cfg._ssbench_module_seconds[mod] = cfg._ssbench_module_seconds.get(mod, 0.0) + report.duration


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist's controller: add up what each worker handed over (pytest_sessionfinish)."""
    got = getattr(node, "workeroutput", {}).get("ssbench")
    if got:
        node.config._ssbench_figures.update(got["figures"])
        node.config._ssbench_fixture_times.extend(tuple(t) for t in got["fixture_times"])
        node.config._ssbench_worker_lines.extend(got["lines"])


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    out = config.getoption("--ssbench-durations-out")
    if out and config._ssbench_module_seconds:
        try:    # make test's two parts write in turn: each adds its modules
            modules = json.loads(Path(out).read_text())["modules"]
        except (OSError, ValueError, KeyError, TypeError):
            modules = {}
        modules.update({k: round(v, 1) for k, v in config._ssbench_module_seconds.items()})
        doc = {"about": "seconds per test module in make test (tests/conftest.py, --ssbench-durations-out): "
                        "the parallel part starts the longest modules first",
               "modules": dict(sorted(modules.items()))}
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
        terminalreporter.write_line(f"module durations written to {out}")
    for line in getattr(config, "_ssbench_worker_lines", ()):
        terminalreporter.write_line(line)
    f = getattr(config, "_ssbench_figures", None)
    if f:
        terminalreporter.write_line("fault suite: " + ", ".join(f"{k} {f[k]}" for k in FIGURE_KEYS))
    slow = sorted((t for t in getattr(config, "_ssbench_fixture_times", ()) if t[0] >= SLOW_FIXTURE_S),
                  reverse=True)
    if slow and config.getoption("durations", None) is not None:
        terminalreporter.write_sep("=", f"fixture set-ups of {SLOW_FIXTURE_S} s or more")
        for secs, scope, name, worker, nodeid in slow:
            terminalreporter.write_line(f"{secs:8.2f}s {scope:<8} {name:<20} {worker:<5} (set up for {nodeid})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """No test may leave this process monkey-patched by gevent (``import locust`` does it): the
    tests after it would run their threads as greenlets, where one blocking call stalls them all
    (a run of the suite hung that way, and Spark's gateway threads failed). Locust runs in
    processes of its own. Checked in every process (each xdist worker is one)."""
    yield
    import sys

    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading") and not os.environ.get("SSBENCH_TEST_GEVENT_PROCESS"):
        pytest.fail(f"the test process is monkey-patched by gevent after {item.nodeid}: this test, or a test "
                    "module at collection, imported locust; run such code in a subprocess", pytrace=False)
