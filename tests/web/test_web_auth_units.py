"""The pieces of ssbench's web login and worker token, without processes: where credentials
come from (and what is refused), the token's form, the HMAC proofs, and the sender spec a
master pushes to its workers (it names the password variable, never the password)."""

from __future__ import annotations

import json

import pytest

from harness.errors import UserError
from harness.load import auth as tok
from harness.web import auth


@pytest.mark.parametrize("host,loop", [("127.0.0.1", True), ("127.5.6.7", True), ("::1", True), ("[::1]", True),
                                       ("localhost", True), ("0.0.0.0", False), ("::", False), ("", False),
                                       ("10.1.2.3", False), ("myhost.lab", False), ("*", False)])
def test_loopback(host, loop):
    assert auth.is_loopback(host) is loop


def test_credentials_from_env():
    assert auth.load_credentials({}) is None
    c = auth.load_credentials({auth.USER_ENV: "ops", auth.PASSWORD_ENV: "long-enough-pw"})
    assert c.user == "ops" and "long-enough-pw" not in c.password_hash and "long-enough-pw" not in c.encoded()
    assert c.check("ops", "long-enough-pw")
    assert not c.check("ops", "long-enough-pX") and not c.check("opz", "long-enough-pw") and not c.check("", "")
    back = auth.Credentials.decode(c.encoded())
    assert back == c and back.check("ops", "long-enough-pw")
    with pytest.raises(UserError, match="must both be set"):
        auth.load_credentials({auth.PASSWORD_ENV: "long-enough-pw"})
    with pytest.raises(UserError, match="at least 8") as e:
        auth.load_credentials({auth.USER_ENV: "ops", auth.PASSWORD_ENV: "shortpw"})
    assert "shortpw" not in str(e.value)


def test_credentials_file(tmp_path):
    f = tmp_path / "creds"
    f.write_text("# the web UI\n\nops:pa:ss-word-1\n")
    f.chmod(0o600)
    c = auth.load_credentials({auth.FILE_ENV: str(f)})
    assert c.user == "ops" and c.check("ops", "pa:ss-word-1")    # the first ':' splits
    for mode in (0o640, 0o604, 0o660):
        f.chmod(mode)
        with pytest.raises(UserError, match="chmod 600") as e:
            auth.load_credentials({auth.FILE_ENV: str(f)})
        assert e.value.exit_code == 2 and e.value.file == str(f)
    bad = tmp_path / "bad"
    bad.write_text("\n# c\nops-only-Secret99\n")
    bad.chmod(0o600)
    with pytest.raises(UserError, match="expected USER:PASSWORD") as e:
        auth.load_credentials({auth.FILE_ENV: str(bad)})
    assert e.value.line == 3 and "Secret99" not in str(e.value)
    with pytest.raises(UserError, match="cannot read"):
        auth.load_credentials({auth.FILE_ENV: str(tmp_path / "missing")})
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    empty.chmod(0o600)
    with pytest.raises(UserError, match="no USER:PASSWORD line"):
        auth.load_credentials({auth.FILE_ENV: str(empty)})


def test_token_form_and_proofs():
    t = tok.new_token()
    assert tok.token_problem(t) is None and len(t) >= tok.MIN_TOKEN_CHARS and t != tok.new_token()
    assert "not set" in tok.token_problem(None)
    assert "at least" in tok.token_problem("short")
    assert "at least" in tok.token_problem("x" * 40 + " ;")
    assert tok.token_from_env({tok.TOKEN_ENV: f"  {t}\n"}) == t and tok.token_from_env({}) is None
    m = tok.mac(t, "worker", "host_1", "n1")
    assert len(m) == 64 and t not in m
    # bound to the role, the worker and the nonce: a recorded proof fits nothing else
    assert len({m, tok.mac(t, "master", "host_1", "n1"), tok.mac(t, "worker", "host_2", "n1"),
                tok.mac(t, "worker", "host_1", "n2"), tok.mac(tok.new_token(), "worker", "host_1", "n1")}) == 5
    assert tok._same(m, tok.mac(t, "worker", "host_1", "n1")) and not tok._same(None, m) and not tok._same(1, m)


def test_auth_module_has_no_web_imports():
    """harness/load/auth.py is shared with ssbench run: it must not import the web layer."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(tok.__file__).read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)] + \
        [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if "web" in n or n.startswith("flask")], names


def test_mssql_spec_pushed_to_workers_names_the_password_variable_only(monkeypatch, tmp_path):
    """The swarm spec a web master sends its workers inline (Locust's spawn message) for a SQL
    Server topology: each sender spec carries the name of the password variable, which every
    worker reads on its own host, and never the password (SQL Server itself is faked: none
    exists here; the spec is built by the target's real code)."""
    from dataclasses import asdict

    from harness.load.spec import SwarmSpec
    from harness.targets.mssql.target import MssqlTarget
    from harness.targets.mssql.topology import load_topology

    secret = "Sentinel-Mssql-Pw-9931"
    monkeypatch.setenv("SSBENCH_TEST_PASSWORD", secret)
    (tmp_path / "t.yaml").write_text(
        "layout: single\nauth: {kind: sql, user: ssbench, password_env: SSBENCH_TEST_PASSWORD}\n"
        "instances:\n" + "".join(f"  {n}: {{host: sql1.lab.example, database: ssbench_{n}}}\n"
                                  for n in ("target", "init1", "init2"))
        + "target: target\ninitiators: [init1, init2]\n")
    t = MssqlTarget(load_topology(tmp_path / "t.yaml"))
    inits = [t.topology.instances["init1"], t.topology.instances["init2"]]
    # what prepare() leaves behind: two active initiators (no SQL Server here to prepare)
    monkeypatch.setattr(t, "_active", lambda: (t.topology.instances["target"], inits))
    specs = {str(i): t.sender_spec(i) for i in (1, 2)}
    wire = json.dumps(asdict(SwarmSpec(sender_specs=specs, payload_bytes=100, usable={"1": 4, "2": 4})))
    assert secret not in wire
    assert wire.count('"password_env": "SSBENCH_TEST_PASSWORD"') == 2, wire
    for s in specs.values():
        assert s["connection"]["host"] == "sql1.lab.example" and s["connection"]["user"] == "ssbench"
        assert not [k for k in s["connection"] if "password" in k.lower() and k != "password_env"], s
