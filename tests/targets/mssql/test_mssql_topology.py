"""Topology files: the examples load, mistakes are reported with file, line and field."""

from __future__ import annotations

import textwrap

import pytest

from harness.errors import UserError
from harness.targets.mssql.topology import load_topology
from env_topology import env_topology
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

BASE = """\
name: t
layout: {layout}
auth: {{kind: sql, user: ssbench, password_env: SSBENCH_MSSQL_PASSWORD}}
instances:
  target: {{host: {h0}, port: 1433, database: SSBReceiver}}
  init1: {{host: {h1}, port: 1433, database: SSBSender}}
target: target
initiators: [init1]
"""


def write(tmp_path, text: str, name: str = "topo.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def err(tmp_path, text: str) -> UserError:
    p = write(tmp_path, text)
    with pytest.raises(UserError) as e:
        load_topology(p)
    assert e.value.file == str(p)
    return e.value


def test_examples_load():
    d = load_topology(REPO / "topologies" / "example-distributed.yaml")
    assert d.layout == "distributed"
    assert list(d.profiles) == ["durable", "delayed"]
    assert d.profiles["delayed"].delayed_durability == "forced"
    target, inits = d.active("delayed", 3)
    assert target.name == "target" and [i.name for i in inits] == ["init1", "init2", "init3"]
    assert target.broker_address == "TCP://sqltarget.lab.example:4022"
    assert d.broker.service == "//MySSB.com/Lab/S_Test"
    assert d.driver.name == "ODBC Driver 18 for SQL Server" and d.driver.encrypt == "mandatory"
    s = load_topology(REPO / "topologies" / "example-single.yaml")
    assert s.layout == "single" and s.driver.trust_server_certificate
    assert {i.server_key for i in s.instances.values()} == {"127.0.0.1:1433"}
    assert list(s.profiles) == ["durable", "delayed"]
    # the README's matrix runs against both examples
    from harness.matrix import load_matrix

    m = load_matrix(REPO / "matrices" / "bench.yaml")
    for topo in (d, s):
        for server in m.axes["server"]:
            for n in m.axes["initiators"]:
                topo.active(server, n)


def test_to_dict_has_no_secrets(monkeypatch):
    monkeypatch.setenv("SSBENCH_MSSQL_PASSWORD", "hunter2-secret")
    d = load_topology(REPO / "topologies" / "example-distributed.yaml").to_dict()
    import json

    text = json.dumps(d)
    assert "hunter2-secret" not in text and "SSBENCH_MSSQL_PASSWORD" in text


def test_literal_password_refused(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b").replace(
        "password_env: SSBENCH_MSSQL_PASSWORD", "password: hunter2"))
    assert "literal passwords are not allowed" in e.detail and "password_env" in e.detail
    assert e.line == 3 and e.field == "auth.password"


def test_any_password_key_refused(tmp_path):
    text = BASE.format(layout="distributed", h0="a", h1="b") + "broker:\n  master_key_password: x\n"
    e = err(tmp_path, text)
    assert e.field == "broker.master_key_password" and e.line == 10


def test_unknown_key(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b") + "bogus: 1\n")
    assert e.field == "bogus" and e.line == 9 and "unknown key" in e.detail


def test_bad_layout(tmp_path):
    e = err(tmp_path, BASE.format(layout="cluster", h0="a", h1="b"))
    assert e.field == "layout" and e.line == 2


def test_single_layout_needs_one_server(tmp_path):
    e = err(tmp_path, BASE.format(layout="single", h0="a", h1="b"))
    assert "layout: single" in e.detail and e.field == "initiators[0]"


def test_distributed_layout_needs_other_servers(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="a"))
    assert "use layout: single" in e.detail


def test_malicious_database_name(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b").replace(
        "database: SSBSender", "database: 'x]; DROP TABLE y--'"))
    assert e.field == "instances.init1.database" and e.line == 6
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b").replace(
        "database: SSBSender", "database: ''"))
    assert "empty" in e.detail


def test_malicious_broker_names(tmp_path):
    base = BASE.format(layout="distributed", h0="a", h1="b")
    for key, value in [("service", "//x/'S"), ("queue", "q]; DROP TABLE y--"),
                       ("contract", "c" * 129), ("message_type", "m;x"),
                       ("activation_procedure", "p p"), ("endpoint_name", "e'")]:
        e = err(tmp_path, base + f"broker:\n  {key}: \"{value}\"\n")
        assert e.field == f"broker.{key}" and e.line == 10, (key, e)


def test_bad_host_and_port(tmp_path):
    base = BASE.format(layout="distributed", h0="a", h1="b")
    e = err(tmp_path, base.replace("host: b,", "host: 'b;x',"))
    assert e.field == "instances.init1.host"
    e = err(tmp_path, base.replace("port: 1433, database: SSBSender", "port: 99999, database: SSBSender"))
    assert e.field == "instances.init1.port"
    e = err(tmp_path, base.replace("database: SSBSender}", "database: SSBSender, broker_port: 80}"))
    assert e.field == "instances.init1.broker_port"


def test_unknown_instance_reference(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b").replace(
        "initiators: [init1]", "initiators: [init1, init9]"))
    assert e.field == "initiators[1]" and "init9" in e.detail


def test_missing_auth(tmp_path):
    text = BASE.format(layout="distributed", h0="a", h1="b").replace(
        "auth: {kind: sql, user: ssbench, password_env: SSBENCH_MSSQL_PASSWORD}\n", "")
    e = err(tmp_path, text)
    assert e.field == "instances.target.auth"


def test_integrated_auth_takes_no_user(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b").replace(
        "auth: {kind: sql,", "auth: {kind: integrated,"))
    assert e.field == "auth.user"
    t = load_topology(write(tmp_path, BASE.format(layout="distributed", h0="a", h1="b").replace(
        "auth: {kind: sql, user: ssbench, password_env: SSBENCH_MSSQL_PASSWORD}",
        "auth: {kind: integrated}")))
    assert t.instances["target"].auth.kind == "integrated"


def test_profiles(tmp_path):
    text = """\
    layout: distributed
    auth: {kind: sql, user: u, password_env: P}
    instances:
      t05: {host: a, database: R}
      t08: {host: b, database: R}
      i05: {host: c, database: S}
      i08: {host: d, database: S}
    profiles:
      sql2005: {target: t05, initiators: [i05]}
      sql2008: {target: t08, initiators: [i08], delayed_durability: forced}
    """
    t = load_topology(write(tmp_path, text))
    assert t.active("sql2005", 1)[0].name == "t05"
    assert [(a.name, b.name) for a, b, _ in t.pairs()] == [("t05", "i05"), ("t08", "i08")]
    with pytest.raises(UserError, match="has 1"):
        t.active("sql2008", 2)
    with pytest.raises(UserError, match="not in the topology"):
        t.profile("sql2012")


def test_initiator_with_two_targets(tmp_path):
    text = """\
    layout: distributed
    auth: {kind: sql, user: u, password_env: P}
    instances:
      t1: {host: a, database: R}
      t2: {host: b, database: R}
      i1: {host: c, database: S}
    profiles:
      p1: {target: t1, initiators: [i1]}
      p2: {target: t2, initiators: [i1]}
    """
    e = err(tmp_path, text)
    assert "one target" in e.detail and e.field == "profiles.p2.initiators[0]" and e.line == 9


def test_same_database_twice(tmp_path):
    e = err(tmp_path, BASE.format(layout="single", h0="a", h1="a").replace(
        "database: SSBSender", "database: SSBReceiver"))
    assert "own database" in e.detail


def test_driver_options(tmp_path):
    base = BASE.format(layout="distributed", h0="a", h1="b")
    t = load_topology(write(tmp_path, base + "driver: {kind: freetds, tds_version: '7.3'}\n"))
    assert t.driver.kind == "freetds" and t.driver.name == "FreeTDS" and t.driver.tds_version == "7.3"
    e = err(tmp_path, base + "driver: {kind: freetds, trust_server_certificate: true}\n")
    assert e.field == "driver.trust_server_certificate"
    e = err(tmp_path, base + "driver: {kind: msodbc, tds_version: '7.4'}\n")
    assert e.field == "driver.tds_version"
    e = err(tmp_path, base + "driver: {encrypt: strict, trust_server_certificate: true}\n")
    assert "strict" in e.detail
    e = err(tmp_path, base + "driver: {name: 'x};DRIVER={y'}\n")
    assert e.field == "driver.name"


def test_duplicate_key(tmp_path):
    e = err(tmp_path, BASE.format(layout="distributed", h0="a", h1="b") + "target: init1\n")
    assert "duplicate" in e.detail and e.line == 9


def test_invalid_yaml_and_missing_file(tmp_path):
    e = err(tmp_path, "instances: [\n")
    assert "invalid YAML" in e.detail
    with pytest.raises(UserError, match="no such file"):
        load_topology(tmp_path / "nope.yaml")


def test_env_topology(monkeypatch, tmp_path):
    """The integration tests' topology from SSBENCH_MSSQL_* (env_topology.py), through the file's checks."""
    monkeypatch.setenv("SSBENCH_MSSQL_HOST", "sql.example")
    monkeypatch.setenv("SSBENCH_MSSQL_USER", "sa")
    monkeypatch.setenv("SSBENCH_MSSQL_PASSWORD", "x")
    monkeypatch.setenv("SSBENCH_MSSQL_DRIVER", "FreeTDS")
    monkeypatch.setenv("SSBENCH_MSSQL_TRUST_CERT", "yes")
    t = env_topology(tmp_path, initiators=2)
    assert t.layout == "single" and t.driver.kind == "freetds"
    assert [i.database for i in t.instances.values()] == ["ssbench_target", "ssbench_init1", "ssbench_init2"]
    assert t.instances["init1"].auth.password_env == "SSBENCH_MSSQL_PASSWORD"
    monkeypatch.setenv("SSBENCH_MSSQL_DATABASE_PREFIX", "x]; DROP--")
    with pytest.raises(UserError):
        env_topology(tmp_path)


def test_a_bad_value_is_never_echoed_with_a_secret_in_it(tmp_path):
    """Issue 26, item 8: a host given as "sqltarget.lab.example;PWD=..." was printed verbatim."""
    for text, field in ((BASE.format(layout="distributed", h0="sqltarget.lab.example;PWD=hunter2", h1="b"),
                         "instances.target.host"),
                        (BASE.format(layout="distributed", h0="a", h1="b") + "driver: {name: 'x;Password={p;w}'}\n",
                         "driver.name"),
                        (BASE.format(layout="distributed", h0="a", h1="b") + "target: ' PWD=hunter2'\n", "target")):
        e = err(tmp_path, text.replace("\ntarget: target\n", "\n", 1) if field == "target" else text)
        assert e.field == field
        assert "hunter2" not in str(e) and "p;w" not in str(e), str(e)
        assert "***" in str(e), str(e)


def test_the_topology_knows_its_file():
    """load_topology's path variable was shadowed by a loop over the profiles: run.json's
    topology.file and the "run provision" hints named the last profile instead of the file."""
    for path in (REPO / "topologies" / "example-distributed.yaml", REPO / "topologies" / "example-single.yaml"):
        topo = load_topology(path)
        assert topo.path == path and topo.to_dict()["file"] == str(path)


# --------------------------------------------------------------------------- issue 52, item 15

def test_a_named_instance_is_reached_through_sql_browser(tmp_path):
    """host: HOST\\INSTANCE names a SQL Server named instance: without a port the drivers ask SQL
    Browser for it (Server=tcp:host\\INSTANCE; FreeTDS Server=host\\INSTANCE, no Port); with one,
    the port is used. Databases on one named instance share a server."""
    from harness.targets.mssql import driver
    from harness.targets.mssql.topology import DriverConfig, load_topology

    p = tmp_path / "named.yaml"
    p.write_text("layout: single\nauth: {kind: sql, user: sa, password_env: PW}\n"
                 "instances:\n"
                 "  target: {host: 'sql1.lab\\INST1', database: t}\n"
                 "  init1: {host: 'SQL1.lab\\inst1', database: i}\n"
                 "target: target\ninitiators: [init1]\n")
    topo = load_topology(p)
    tgt, ini = topo.instances["target"], topo.instances["init1"]
    assert (tgt.host, tgt.instance_name, tgt.port) == ("sql1.lab", "INST1", 0)
    assert tgt.server == "sql1.lab\\INST1" and tgt.server_key == ini.server_key
    assert tgt.where() == "target (sql1.lab\\INST1, database t)"
    cs = driver.spec_for(tgt, DriverConfig()).connection_string("pw")
    assert "Server=tcp:sql1.lab\\INST1;" in cs
    fcs = driver.spec_for(tgt, DriverConfig(kind="freetds", name="FreeTDS")).connection_string("pw")
    assert "Server=sql1.lab\\INST1;" in fcs and "Port=" not in fcs
    p.write_text(p.read_text().replace("database: t}", "database: t, port: 1500}")
                 .replace("database: i}", "database: i, port: 1500}"))
    cs = driver.spec_for(load_topology(p).instances["target"], DriverConfig()).connection_string("pw")
    assert "Server=tcp:sql1.lab\\INST1,1500;" in cs
    p.write_text(p.read_text().replace("INST1", "1NST-TOO-LONG-NAME"))
    with pytest.raises(UserError, match=r"named.yaml:4: instances.target.host: .* is not a SQL Server instance name"):
        load_topology(p)
