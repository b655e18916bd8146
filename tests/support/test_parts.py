"""tests/support/parts.py: every test that starts a swarm, a Spark JVM or a browser is listed
with its part (tests/parts.txt), and the rules refuse a test that does not say whether its
outcome depends on the host's speed. Each rule is shown failing on a scratch suite of its own
(a pytest run in a subprocess with tests/conftest.py's plugins)."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path


from support import parts

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
LISTING = TESTS / "parts.txt"
#: the word that makes a process a swarm in the scratch suites (SSBENCH_TEST_PARTS_AS)
FAKE = "stand-in-swarm-for-test-parts"
WRITE = ".venv/bin/python -m pytest --collect-only -q -p no:cacheprovider --ssbench-parts-out tests/parts.txt"


def _pytest(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_listing_is_the_suites(tmp_path, pytestconfig):
    """tests/parts.txt lists exactly the tests that start something, with their parts: a new
    heavy test, or one moved from part to part, shows here. The list this session made when it
    collected the suite, or, when it collected only some of it, a collection of its own."""
    listed, modules = pytestconfig._ssbench_parts
    if {str(p) for p in TESTS.rglob("test_*.py")} <= modules:
        got = listed.splitlines()
    else:
        out = tmp_path / "parts.txt"
        r = _pytest(REPO, "--collect-only", "-q", "--ssbench-parts-out", str(out), timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        got = out.read_text().splitlines()
    want = LISTING.read_text().splitlines()
    diff = "\n".join(difflib.unified_diff(want, got, "tests/parts.txt", "the suite", lineterm="", n=0))
    assert want == got, f"tests/parts.txt is not the suite's list; write it again with\n  {WRITE}\n{diff}"
    body = [line.split() for line in got if not line.startswith("#")]
    assert body and all(row[0] in ("parallel", "alone") for row in body)
    # the rule, read back from the list: nothing timing runs in the parallel part
    assert not [row for row in body if row[0] == "parallel" and row[1] == "timing"]


CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
pytest_plugins = ["support.parts"]
"""
MARKERS = """
[pytest]
markers =
    swarm: x
    spark: x
    browser: x
    timing: x
    untimed: x
    alone: x
"""


def _scratch(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text(MARKERS)
    (tmp_path / "test_scratch.py").write_text(body)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                           "test_scratch.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, SSBENCH_TEST_PARTS_AS=f"swarm={FAKE}"))


#: a scratch suite breaking every rule once, beside tests that keep them
RULES = """import time
import pytest
from support.parts import starts


@pytest.fixture
@starts("swarm")
def run():
    return 1


@pytest.mark.swarm
def test_undeclared_swarm():
    pass


def test_undeclared_fixture(run):
    pass


@pytest.mark.untimed("counts only")
def test_declared_fixture(run):
    pass


def test_took():
    t0 = time.monotonic()
    took = time.monotonic() - t0
    assert took < 10


def test_deadline_only():
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        break
    assert True


@pytest.mark.swarm
@pytest.mark.untimed
def test_no_reason():
    pass


@pytest.mark.timing
@pytest.mark.untimed("y")
def test_both():
    pass
"""


def test_every_rule_refuses_the_suite_naming_each_test_that_breaks_it(tmp_path):
    """A swarm test that does not say timing or untimed, one whose fixture starts the swarm, an
    assertion on a time read from a clock, untimed without its reason, timing and untimed at
    once: the suite is refused (a usage error, nothing runs), each named with the rule; the
    tests that keep the rules (a declared one, a clock read for a deadline only) are not."""
    r = _scratch(tmp_path, RULES)
    text = r.stdout + r.stderr
    assert r.returncode == 4, text
    for line in ("test_scratch.py::test_undeclared_swarm: starts a swarm: mark it timing (it runs alone) or untimed",
                 "test_scratch.py::test_undeclared_fixture: starts a swarm: mark it timing",
                 "test_scratch.py::test_took: asserts on a time read from a clock (line(s) 29)",
                 "test_scratch.py::test_no_reason: untimed needs its reason",
                 "test_scratch.py::test_both: marked both timing and untimed"):
        assert line in text, (line, text)
    assert "test_declared_fixture" not in text and "test_deadline_only" not in text, text


def test_a_test_that_runs_alone_is_refused_from_a_file_that_does_not_say_so(tmp_path):
    """The alone parts collect only the files that write ``mark.timing`` or ``mark.alone``
    (tests/conftest.py): a test marked so another way would run in neither part."""
    body = "import pytest\n\nhidden = getattr(pytest.mark, 'tim' + 'ing')\n\n\n@hidden\ndef test_hidden_alone():\n    pass\n"
    r = _scratch(tmp_path, body)
    text = r.stdout + r.stderr
    assert r.returncode == 4, text
    assert "test_scratch.py::test_hidden_alone: runs alone, but its file does not write pytest.mark.timing" in text


def test_a_process_started_without_saying_so_fails_the_test(tmp_path):
    """The watcher sees a process the scratch suite counts as a swarm (a sleeping Python with
    the stand-in word on its command line) started by a test that declared none."""
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(1.2)', {FAKE!r}]"
    body = ("import subprocess, sys, pytest\n\n"
            f"def test_hidden():\n    subprocess.run({sleeper})\n\n"
            "@pytest.mark.swarm\n@pytest.mark.untimed('a sleep')\n"
            f"def test_declared():\n    subprocess.run({sleeper})\n")
    r = _scratch(tmp_path, body)
    text = r.stdout + r.stderr
    assert r.returncode == 1, text
    assert "test_scratch.py::test_hidden started a Locust swarm without saying so" in text
    assert "2 passed, 1 error" in text, text      # test_hidden passes, then errs at its tear-down


def test_what_a_process_is():
    for cmdline, kind in [
            ("/venv/bin/python -m locust -f harness/load/locustfile.py --worker", "swarm"),
            ("/venv/bin/python -m harness.load.launch -f /r/harness/load/locustfile.py --master", "swarm"),
            ("/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp /x/pyspark/jars/* org.apache.spark.deploy.SparkSubmit",
             "spark"),
            ("/usr/lib/chromium/chromium --headless --type=renderer", "browser"),
            ("/usr/bin/chromedriver --port=4444", "browser"),
            ("/usr/lib/postgresql/bin/postgres -D /var/tmp/x", None),
            ("/usr/bin/java -jar other.jar", None)]:
        assert parts.kind_of(cmdline) == kind, cmdline
