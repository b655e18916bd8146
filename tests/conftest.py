"""Shared fixtures. Servers are real: the embedded PostgreSQL runs from a private data
directory per test session (never the user's own ~/.cache/ssbench)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def pg_data_dir():
    base = Path(tempfile.mkdtemp(prefix="ssbench-test-pg-", dir="/var/tmp" if os.geteuid() == 0 else None))
    d = base / "pg"
    old = os.environ.get("SSBENCH_PGDATA")
    os.environ["SSBENCH_PGDATA"] = str(d)
    yield d
    from harness.targets.embedded.server import EmbeddedServer

    EmbeddedServer(d).destroy()
    shutil.rmtree(base, ignore_errors=True)
    if old is None:
        os.environ.pop("SSBENCH_PGDATA", None)
    else:
        os.environ["SSBENCH_PGDATA"] = old


@pytest.fixture(scope="session")
def pg_server(pg_data_dir):
    """A running embedded PostgreSQL server (started once per test session)."""
    from harness.targets.embedded.server import EmbeddedServer

    srv = EmbeddedServer(pg_data_dir)
    srv.start()
    yield srv
    srv.stop()


# --------------------------------------------------------------------------- the fault suite's figures

FIGURE_KEYS = ("faults injected", "faults survived", "messages lost", "duplicates",
               "bad inputs tried", "bad inputs clean")


def pytest_configure(config):
    from collections import Counter

    config._ssbench_figures = Counter()


@pytest.fixture
def figures(request):
    """Counters the fault-injection and bad-input suites add to; printed as one line at the end."""
    return request.config._ssbench_figures


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    f = getattr(config, "_ssbench_figures", None)
    if f:
        terminalreporter.write_line("fault suite: " + ", ".join(f"{k} {f[k]}" for k in FIGURE_KEYS))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """No test may leave this process monkey-patched by gevent (``import locust`` does it): the
    tests after it would run their threads as greenlets, where one blocking call stalls them all
    (a run of the suite hung that way, and Spark's gateway threads failed). Locust runs in
    processes of its own."""
    yield
    import sys

    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading") and not os.environ.get("SSBENCH_TEST_GEVENT_PROCESS"):
        pytest.fail(f"the test process is monkey-patched by gevent after {item.nodeid}: this test, or a test "
                    "module at collection, imported locust; run such code in a subprocess", pytrace=False)
