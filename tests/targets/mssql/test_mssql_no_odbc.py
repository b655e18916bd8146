"""A fresh machine without unixODBC: pyodbc's wheel is installed but cannot load libodbc.so.2.

Proven for real in subprocesses: a ``pyodbc`` module first on the path raises the ImportError
the real extension raises when the driver manager is missing. Collection of the SQL Server
tests must still succeed (skips naming ``apt-get install unixodbc``), the CLI tests must pass,
and ``ssbench mssql`` must print one line naming the package and exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
MISSING = "libodbc.so.2: cannot open shared object file: No such file or directory"


@pytest.fixture
def no_odbc_env(tmp_path):
    """Environment whose ``import pyodbc`` fails as it does without unixODBC."""
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "pyodbc.py").write_text(f"raise ImportError({MISSING!r})\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(stub), str(REPO)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("PYTEST_ADDOPTS", None)
    # the nested pytest sessions run no Spark: they must not write the class-data archive
    # (tests/conftest.py does where none is installed yet, as after another checkout's evicted it)
    env["SSBENCH_SPARK_CDS"] = "0"
    return env


def run(args, env, timeout=300):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout)


def test_the_stub_fails_like_the_real_thing(no_odbc_env):
    out = run(["-c", "import pyodbc"], no_odbc_env)
    assert out.returncode == 1 and f"ImportError: {MISSING}" in out.stderr


def test_collection_and_cli_tests_without_unixodbc(no_odbc_env, tmp_path):
    col = run(["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "--rootdir", str(REPO), str(HERE)], no_odbc_env)
    assert col.returncode == 0, col.stdout[-3000:] + col.stderr[-3000:]
    summary = col.stdout.strip().splitlines()[-1]
    assert "collected" in summary and "error" not in summary, summary
    res = run(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(REPO),
               str(HERE / "test_mssql_cli.py"), str(HERE / "test_mssql_driver.py"),
               str(HERE / "test_mssql_sender.py")], no_odbc_env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = res.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert "apt-get install unixodbc" in res.stdout        # the skip reasons say what to install


def test_cli_names_the_missing_package(no_odbc_env, tmp_path):
    topo = tmp_path / "t.yaml"
    topo.write_text(textwrap.dedent("""\
        layout: single
        driver: {kind: freetds}
        auth: {kind: sql, user: sa, password_env: SSBENCH_TEST_MSSQL_PW}
        instances:
          target: {host: 127.0.0.1, port: 1433, database: ssbench_target}
          init1: {host: 127.0.0.1, port: 1433, database: ssbench_init1}
        target: target
        initiators: [init1]
        """))
    no_odbc_env["SSBENCH_TEST_MSSQL_PW"] = "s3cret-pw"
    for action in (["check"], ["provision"], ["smoke"], ["teardown", "--yes"]):
        out = run(["-m", "harness.cli", "mssql", *action, str(topo)], no_odbc_env, timeout=60)
        assert out.returncode == 2, (action, out.stderr)
        err = out.stderr.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith("ssbench: error: pyodbc cannot be imported")
        assert "apt-get install unixodbc" in err and MISSING in err
        assert "s3cret-pw" not in err + out.stdout


def test_target_imports_without_pyodbc(no_odbc_env):
    """Everything but connecting works without pyodbc / unixODBC."""
    code = textwrap.dedent("""\
        from harness.targets.mssql.target import MssqlTarget
        from harness.targets.mssql import driver
        t = MssqlTarget.from_file('topologies/example-single.yaml')
        assert t.profiles() and driver.drivers() == []
        try:
            driver.connect('Driver={x};', autocommit=True)
        except Exception as e:
            print(type(e).__name__, e)
        """)
    out = run(["-c", code], no_odbc_env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PyodbcUnavailable pyodbc cannot be imported")
    assert "apt-get install unixodbc" in out.stdout
