"""``ssbench mssql ...``: user errors exit 2 with file:line, server errors exit 3 with one clean
line (real ODBC stack: FreeTDS against a closed port on 127.0.0.1)."""

from __future__ import annotations

import socket
import textwrap

import pytest
from odbc_support import require_odbc_driver, require_pyodbc

from harness.cli import build_parser, main


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def topology(tmp_path, port: int, driver: str = "freetds", extra: str = "") -> str:
    p = tmp_path / "topo.yaml"
    p.write_text(textwrap.dedent(f"""\
        name: cli
        layout: single
        driver: {{kind: {driver}, login_timeout_seconds: 3}}
        auth: {{kind: sql, user: sa, password_env: SSBENCH_TEST_MSSQL_PW}}
        instances:
          target: {{host: 127.0.0.1, port: {port}, database: ssbench_target}}
          init1: {{host: 127.0.0.1, port: {port}, database: ssbench_init1}}
        target: target
        initiators: [init1]
        """) + extra)
    return str(p)


def test_help_lists_actions(capsys):
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["mssql", "--help"])
    out = capsys.readouterr().out
    for action in ("check", "provision", "teardown", "smoke"):
        assert action in out


def test_bad_topology_exits_2(tmp_path, capsys):
    path = topology(tmp_path, 1433).replace("topo.yaml", "bad.yaml")
    text = open(topology(tmp_path, 1433)).read().replace("password_env: SSBENCH_TEST_MSSQL_PW",
                                                         "password: hunter2")
    open(path, "w").write(text)
    assert main(["mssql", "check", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ssbench: error: {path}:4: auth.password: literal passwords are not allowed")
    assert "hunter2" not in err


def test_missing_password_variable_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SSBENCH_TEST_MSSQL_PW", raising=False)
    require_odbc_driver("FreeTDS", "tdsodbc")
    assert main(["mssql", "provision", topology(tmp_path, closed_port())]) == 2
    assert "environment variable SSBENCH_TEST_MSSQL_PW is not set" in capsys.readouterr().err


def test_unreachable_server_exits_3(tmp_path, capsys, monkeypatch):
    require_odbc_driver("FreeTDS", "tdsodbc")
    monkeypatch.setenv("SSBENCH_TEST_MSSQL_PW", "not-a-real-password")
    port = closed_port()
    assert main(["mssql", "check", topology(tmp_path, port)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ssbench: target error: target (127.0.0.1:{port}, database master): "
                          "cannot reach the server")
    assert "not-a-real-password" not in err and len(err.splitlines()) == 1


def test_missing_driver_reported_by_check(tmp_path, capsys, monkeypatch):
    require_pyodbc()
    monkeypatch.setenv("SSBENCH_TEST_MSSQL_PW", "x")
    # ODBC Driver 18 is not installed on CI machines: check says so and lists what is
    from harness.targets.mssql import driver

    if "ODBC Driver 18 for SQL Server" in driver.drivers():
        pytest.skip("ODBC Driver 18 is installed here")
    assert main(["mssql", "check", topology(tmp_path, closed_port(), driver="msodbc")]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "'ODBC Driver 18 for SQL Server' is not installed" in out


def test_teardown_needs_yes_without_a_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SSBENCH_TEST_MSSQL_PW", "x")
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    assert main(["mssql", "teardown", topology(tmp_path, closed_port())]) == 2
    assert "--yes" in capsys.readouterr().err
