"""Matrix cases (``cases:``), the processing axis and the emulation knobs (harness.matrix):
expansion, ids, what summaries and run.json record, and the refusals (file, line, field)."""

from __future__ import annotations

import textwrap

import pytest

from harness.errors import UserError
from harness.matrix import BrokerSettings, broker_values, load_matrix
from harness.targets.embedded.target import EmbeddedTarget
from harness.targets.mssql.target import MssqlTarget

#: check_servers' arguments as each target's TargetConfig.check_matrix passes them
EMBEDDED = {"supports": EmbeddedTarget.capabilities.features(), "aliases": True}
MSSQL = {"supports": MssqlTarget.capabilities.features()}

CASES = """\
name: c
axes:
  initiators: [1]
  threads: [8]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [delayed]
broker:
  max_queue_readers: 2
cases:
  - name: send_lock
    description: a shared dialog
    axes: {dialogs: [shared], server: [durable]}
  - name: processing
    axes: {threads: [1, 4]}
    broker: {max_queue_readers: 1, processing_us_per_message: 1000}
  - name: transmission
    axes: {rate: [1500]}
    broker: {transport_rate_limit: 800}
"""


def write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_cases_expand_in_order_each_over_its_own_axes(tmp_path):
    m = load_matrix(write(tmp_path, CASES))
    perms = list(m.permutations())
    assert [p.id for p in perms] == ["i1-t8-shared-p100-durable-send_lock",
                                     "i1-t1-per_thread-p100-delayed-processing",
                                     "i1-t4-per_thread-p100-delayed-processing",
                                     "i1-t8-per_thread-p100-delayed-rate1500-transmission"]
    assert [p.index for p in perms] == [1, 2, 3, 4]
    assert len(m) == 4
    lock, proc, _, tx = perms
    assert lock.broker == BrokerSettings(max_queue_readers=2)
    assert proc.broker.max_queue_readers == 1 and proc.broker.processing_us_per_message == 1000
    assert tx.broker.transport_rate_limit == 800.0 and tx.rate == 1500.0
    v = proc.values()
    assert v["case"] == "processing" and v["broker"]["processing_us_per_message"] == 1000
    assert "transport_rate_limit" not in v["broker"]          # optional settings only when set
    d = m.to_dict()
    assert [c["name"] for c in d["cases"]] == ["send_lock", "processing", "transmission"]
    assert d["cases"][0]["axes"] == {"dialogs": ["shared"], "server": ["durable"]}
    assert d["permutations"] == 4


def test_a_matrix_without_cases_or_new_settings_records_what_it_did(tmp_path):
    """run.json's matrix and the summaries' permutation keep their old shape (a gate against an
    older baseline sees the same settings)."""
    m = load_matrix(write(tmp_path, CASES.split("cases:")[0]))
    p = next(m.permutations())
    assert p.id == "i1-t8-per_thread-p100-delayed" and "case" not in p.values()
    assert set(p.values()["broker"]) == {"max_queue_readers", "receive_top", "waitfor_timeout_ms",
                                         "monitor_interval_seconds", "high_priority_share"}
    assert "cases" not in m.to_dict() and set(m.to_dict()["broker"]) == set(p.values()["broker"])
    assert broker_values(BrokerSettings(client_cpu_us_per_send=5))["client_cpu_us_per_send"] == 5


def test_processing_is_an_axis_on_both_targets(tmp_path):
    text = CASES.split("cases:")[0].replace("  server: [delayed]\n",
                                            "  server: [delayed]\n  processing_us_per_message: [0, 500]\n")
    m = load_matrix(write(tmp_path, text))
    perms = list(m.permutations())
    assert [p.id for p in perms] == ["i1-t8-per_thread-p100-delayed-proc0", "i1-t8-per_thread-p100-delayed-proc500"]
    assert perms[1].broker.processing_us_per_message == 500
    m.check_servers("mssql", ["delayed"], **MSSQL)           # SQL Server has the knob too


@pytest.mark.parametrize("setting, line, fld", [
    ("transport_rate_limit: 800", 10, "broker.transport_rate_limit"),
    ("client_cpu_us_per_send: 100", 10, "broker.client_cpu_us_per_send"),
])
def test_the_emulation_knobs_are_refused_on_sql_server(tmp_path, setting, line, fld):
    text = CASES.split("cases:")[0] + f"  {setting}\n"
    m = load_matrix(write(tmp_path, text))
    m.check_servers("embedded", ["delayed"], **EMBEDDED)
    with pytest.raises(UserError, match=rf"m.yaml:{line}: {fld}: the mssql target does not emulate"):
        m.check_servers("mssql", ["delayed"], **MSSQL)


def test_a_case_knob_on_sql_server_names_the_case(tmp_path):
    m = load_matrix(write(tmp_path, CASES))
    with pytest.raises(UserError, match=r"m.yaml:19: cases\[2\].broker.transport_rate_limit: the mssql target"):
        m.check_servers("mssql", ["delayed", "durable"], **MSSQL)


def test_a_case_server_is_checked_against_the_target(tmp_path):
    m = load_matrix(write(tmp_path, CASES.replace("server: [durable]", "server: [fast]")))
    with pytest.raises(UserError, match=r"m.yaml:13: cases\[0\].axes.server\[0\]: server profile 'fast'"):
        m.check_servers("embedded", ["delayed", "durable"], **EMBEDDED)


def test_case_threads_need_not_split_evenly_over_worker_processes(tmp_path):
    """Threads split over the processes as evenly as possible (harness.load.placement): a case's
    1 thread with run.workers_per_initiator 2 is accepted, like any threads value."""
    text = CASES.replace("broker:\n  max_queue_readers: 2\n",
                         "broker:\n  max_queue_readers: 2\nrun:\n  workers_per_initiator: 2\n")
    m = load_matrix(write(tmp_path, text))
    assert m.run.workers_per_initiator == 2 and len(m) == 4


def test_cases_and_blocks_together_run_every_block_in_every_case(tmp_path):
    """Both make the matrix a union of products: each case (its axes, its broker settings)
    crossed with each block's axes; a case may not replace a block's axis."""
    text = CASES.replace("cases:\n", "blocks:\n  - {waitfor_timeout_ms: [50]}\n  - {max_queue_readers: [1, 4]}\n"
                                      "cases:\n").replace("    axes: {rate: [1500]}\n", "")
    m = load_matrix(write(tmp_path, text))
    ids = [p.id for p in m.permutations()]
    assert ids[:3] == ["i1-t8-shared-p100-durable-wf50-send_lock", "i1-t8-shared-p100-durable-r1-send_lock",
                       "i1-t8-shared-p100-durable-r4-send_lock"]
    assert len(ids) == len(set(ids)) == 3 + 6 + 3 and [p.index for p in m.permutations()] == list(range(1, 13))
    tx = [p for p in m.permutations() if p.case == "transmission"]
    assert [p.broker.max_queue_readers for p in tx] == [2, 1, 4] and all(p.broker.transport_rate_limit == 800
                                                                         for p in tx)
    d = m.to_dict()
    assert len(d["blocks"]) == 2 and len(d["cases"]) == 3 and d["permutations"] == 12
    bad = text.replace("    axes: {threads: [1, 4]}\n", "    axes: {threads: [1, 4], max_queue_readers: [2]}\n")
    with pytest.raises(UserError, match=r"m.yaml:18: cases\[1\].axes.max_queue_readers: an axis of the blocks"):
        load_matrix(write(tmp_path, bad))


def test_a_case_needing_more_connections_than_the_server_has_names_its_threads(tmp_path):
    from harness.targets.base import Capabilities, ConnectionBudget, TargetConfig

    text = CASES.replace("    axes: {threads: [1, 4]}\n", "    axes: {threads: [1, 400]}\n")
    m = load_matrix(write(tmp_path, text))
    config = TargetConfig(name="embedded", profiles=("delayed", "durable"), capabilities=Capabilities(
        transport_rate_limit=True), connections=ConnectionBudget(limit=100))
    with pytest.raises(UserError, match=r"m.yaml:15: cases\[1\].axes.threads\[1\]: 1 initiator\(s\) x 400 threads"):
        config.check_matrix(m)


@pytest.mark.parametrize("case, line, fld, msg", [
    ("  - name: Bad\n", 20, r"cases\[3\].name", "lowercase letter"),
    ("  - name: send_lock\n", 20, r"cases\[3\].name", "duplicate case name 'send_lock'"),
    ("  - axes: {threads: [1]}\n", 20, r"cases\[3\].name", "missing"),
    ("  - name: x\n    extra: 1\n", 21, r"cases\[3\].extra", "unknown key"),
    ("  - name: x\n    axes: {threads: []}\n", 21, r"cases\[3\].axes.threads", "empty axis"),
    ("  - name: x\n    axes: {colour: [1]}\n", 21, r"cases\[3\].axes.colour", "unknown axis"),
    ("  - name: x\n    broker: {processing_us_per_message: -1}\n", 21,
     r"cases\[3\].broker.processing_us_per_message", "must be between 0 and 1000000"),
    ("  - just a string\n", 20, r"cases\[3\]", "a case is a mapping"),
    ("  - name: x\n    run: {repetitions: 5}\n", 21, r"cases\[3\].run.repetitions",
     "unknown key \\(expected one of warmup_seconds, measure_seconds, drain_timeout_seconds\\)"),
    ("  - name: x\n    run: {measure_seconds: 0}\n", 21, r"cases\[3\].run.measure_seconds", "must be between"),
    ("  - name: x\n    run: [1]\n", 21, r"cases\[3\].run", "must be a mapping"),
])
def test_bad_cases_are_refused_with_file_line_and_field(tmp_path, case, line, fld, msg):
    with pytest.raises(UserError, match=rf"m.yaml:{line}: {fld}: .*{msg}"):
        load_matrix(write(tmp_path, CASES + case))


def test_cases_must_be_a_non_empty_list(tmp_path):
    with pytest.raises(UserError, match=r"m.yaml:10: cases: must be a non-empty list"):
        load_matrix(write(tmp_path, CASES.split("cases:")[0] + "cases: []\n"))


def test_embedded_profiles_may_name_a_case_server(tmp_path):
    text = CASES.replace("server: [durable]", "server: [sql2008]") + "embedded_profiles:\n  sql2008: durable\n"
    m = load_matrix(write(tmp_path, text), embedded_profiles=["durable", "delayed"])
    assert m.embedded_profiles == {"sql2008": "durable"}
    m.check_servers("embedded", ["durable", "delayed"], **EMBEDDED)


def test_a_case_may_give_its_own_windows(tmp_path, capsys):
    """A case's ``run:`` sets its windows (a 1-thread permutation measured longer) and its drain
    bound (a backlog built on purpose); the other cases, and every other run setting, stay the
    matrix's."""
    text = CASES.replace("broker:\n  max_queue_readers: 2\n",
                         "broker:\n  max_queue_readers: 2\nrun:\n  warmup_seconds: 2\n  measure_seconds: 6\n"
                         "  repetitions: 3\n")
    text = text.replace("    axes: {threads: [1, 4]}\n", "    axes: {threads: [1, 4]}\n    run: {measure_seconds: 16}\n")
    text = text.replace("server: [durable]}\n", "server: [durable]}\n    run: {drain_timeout_seconds: 2}\n")
    m = load_matrix(write(tmp_path, text))
    lock, proc1, proc4, tx = m.permutations()
    assert m.run_for(tx) is m.run and m.run.drain_timeout_seconds == 120
    assert (m.run_for(lock).drain_timeout_seconds, m.run_for(lock).measure_seconds) == (2.0, 6.0)
    for p in (proc1, proc4):
        r = m.run_for(p)
        assert (r.warmup_seconds, r.measure_seconds, r.repetitions, r.drain_timeout_seconds) == (2.0, 16.0, 3, 120)
    assert m.lines["cases[1].run.measure_seconds"] == 21 and m.lines["cases[0].run.drain_timeout_seconds"] == 18
    cases = m.to_dict()["cases"]
    assert cases[1]["run"] == {"measure_seconds": 16.0} and cases[0]["run"] == {"drain_timeout_seconds": 2.0}
    from harness.cli import main

    assert main(["matrix", str(tmp_path / "m.yaml")]) == 0
    listing = capsys.readouterr().out
    assert "# case send_lock: warm-up 2s, measured 6s, drain at most 2s\n" in listing, listing
    assert "# case processing: warm-up 2s, measured 16s\n" in listing, listing
