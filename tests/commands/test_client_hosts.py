"""The topology file's ``client_hosts:`` section: the load layer's (harness.load.hosts), read
from the file the target names and checked against its initiators (every error one line
naming file, line and field, exit 2), and turned into the same RemoteWorkers as
``--remote-workers --master-bind ... --worker-wait ...``, the flags overriding the file."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands.common import add_run_options
from harness.commands.run import scale_settings
from harness.errors import UserError
from harness.load.hosts import MASTER_HOST, MASTER_PORT, WORKER_WAIT_SECONDS, client_hosts
from harness.load.swarm import RemoteWorkers
from harness.matrix import load_matrix
from harness.targets.factory import target_config

REPO = Path(__file__).resolve().parents[2]
TOKEN = "x" * 40

TOPOLOGY = """\
name: lab
layout: distributed
auth: {kind: sql, user: ssbench, password_env: SSBENCH_MSSQL_PASSWORD}
instances:
  target: {host: h0.example, database: SSBReceiver}
  init1: {host: h1.example, database: SSBSender}
  init2: {host: h2.example, database: SSBSender}
target: target
initiators: [init1, init2]
"""

SECTION = """\
client_hosts:
  master_bind: 10.0.0.5:6000
  worker_wait_seconds: 45
  workers_per_initiator: 2
  hosts:
    client1: {initiators: [init1]}
    client2: {initiators: [init2]}
"""

MATRIX = """\
name: t
axes:
  initiators: [2]
  threads: [4]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [default]
"""


def _files(tmp_path, section: str = SECTION):
    topo = tmp_path / "lab.yaml"
    topo.write_text(TOPOLOGY + section)
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX)
    return topo, m


def _args(*argv):
    p = argparse.ArgumentParser()
    add_run_options(p)
    return p.parse_args(list(argv))


def test_the_section_loads_from_the_targets_file(tmp_path):
    topo, _ = _files(tmp_path)
    config = target_config(str(topo))
    assert config.file == topo and config.initiator_names == ("init1", "init2")
    ch = client_hosts(config)
    assert (ch.bind_host, ch.port, ch.worker_wait_seconds, ch.workers_per_initiator) == ("10.0.0.5", 6000, 45.0, 2)
    assert ch.hosts == {"client1": ("init1",), "client2": ("init2",)}
    plain = tmp_path / "plain.yaml"
    plain.write_text(TOPOLOGY)
    assert client_hosts(target_config(str(plain))) is None
    assert client_hosts(target_config("embedded")) is None     # a target without a file


def test_the_defaults_are_declared_once():
    """The defaults of remote workers are harness.load.hosts's: the RemoteWorkers of the swarm
    and a section without values take them."""
    assert RemoteWorkers() == RemoteWorkers(bind_host=MASTER_HOST, port=MASTER_PORT, wait_seconds=WORKER_WAIT_SECONDS)
    assert (MASTER_HOST, MASTER_PORT, WORKER_WAIT_SECONDS) == ("0.0.0.0", 5557, 120.0)


def test_a_topology_with_client_hosts_means_remote_workers_as_the_flags_would(tmp_path, monkeypatch):
    monkeypatch.setenv("SSBENCH_WORKER_TOKEN", TOKEN)
    topo, m = _files(tmp_path)
    matrix = load_matrix(m)
    remote = scale_settings(_args("--target", str(topo)), matrix)
    assert remote == RemoteWorkers(bind_host="10.0.0.5", port=6000, wait_seconds=45.0)
    assert matrix.run.workers_per_initiator == 2
    same = load_matrix(m)
    assert scale_settings(_args("--target", "embedded", "--remote-workers", "--master-bind", "10.0.0.5:6000",
                                "--worker-wait", "45", "--workers-per-initiator", "2"), same) == remote
    # the flags override the file
    over = load_matrix(m)
    remote = scale_settings(_args("--target", str(topo), "--master-bind", "0.0.0.0:7000", "--worker-wait", "9",
                                  "--workers-per-initiator", "1"), over)
    assert remote == RemoteWorkers(bind_host="0.0.0.0", port=7000, wait_seconds=9.0)
    assert over.run.workers_per_initiator == 1


def test_defaults_and_the_token_requirement(tmp_path, monkeypatch):
    topo, m = _files(tmp_path, "client_hosts:\n  hosts:\n    c1: {initiators: [init1, init2]}\n")
    monkeypatch.delenv("SSBENCH_WORKER_TOKEN", raising=False)
    with pytest.raises(UserError, match="SSBENCH_WORKER_TOKEN"):
        scale_settings(_args("--target", str(topo)), load_matrix(m))
    monkeypatch.setenv("SSBENCH_WORKER_TOKEN", TOKEN)
    matrix = load_matrix(m)
    assert scale_settings(_args("--target", str(topo)), matrix) == RemoteWorkers()   # 0.0.0.0:5557, 120 s
    assert matrix.run.workers_per_initiator == 1


@pytest.mark.parametrize("section, field", [
    ("client_hosts:\n  hosts:\n    c1: {initiators: [target]}\n", "client_hosts.hosts.c1.initiators[0]"),
    ("client_hosts:\n  workers_per_initiator: 0\n", "client_hosts.workers_per_initiator"),
    ("client_hosts:\n  hosts:\n    'bad host': {initiators: [init1]}\n", "client_hosts.hosts.bad host"),
    ("client_hosts:\n  hosts: []\n", "client_hosts.hosts"),
])
def test_bad_sections_are_one_line_naming_the_field_exit_2(tmp_path, section, field):
    topo, m = _files(tmp_path, section)
    with pytest.raises(UserError) as e:
        client_hosts(target_config(str(topo)))
    assert e.value.field == field and e.value.line is not None and e.value.file == str(topo)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(m), "--target", str(topo),
                        "--out", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_the_example_topologys_commented_section_loads_when_uncommented(tmp_path):
    text = (REPO / "topologies" / "example-distributed.yaml").read_text()
    head, _, tail = text.partition("# client_hosts:")
    section = "client_hosts:\n" + "\n".join(line[2:] for line in tail.splitlines() if line.startswith("#   "))
    p = tmp_path / "example.yaml"
    p.write_text(head + section + "\n")
    ch = client_hosts(target_config(str(p)))
    assert ch.hosts == {"client-1": ("init1",), "client-2": ("init2",), "client-3": ("init3",)}
    assert (ch.bind_host, ch.port, ch.worker_wait_seconds) == ("0.0.0.0", 5557, 120.0)
