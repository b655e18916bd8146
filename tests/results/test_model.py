"""The results contract: typed summaries round-trip, refuse unknown schema versions, and every
field is documented in docs/results.md."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.results.model import PermutationSummary, RepetitionSummary, RunRecord

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "results.md").read_text()


def sample_summary() -> dict:
    return {
        "schema": "ssbench.summary/1", "run_id": "r", "permutation_id": "i1-t1-per_thread-p100-durable",
        "repetition": 1, "permutation": {"id": "i1-t1-per_thread-p100-durable", "threads": 1},
        "target": {"kind": "embedded", "label": "PostgreSQL 18.6 emulation of Service Broker", "profile": "durable"},
        "window": {"warmup_seconds": 1, "measure_seconds": 2.0, "measure_start": 10.0, "measure_end": 12.0,
                   "spawn_complete": 9.0},
        "dialogs_created": 1, "usable_dialogs": 1, "messages_sent": 10, "messages_sent_client": 10,
        "messages_received": 10, "messages_lost": 0, "drained": True,
        "per_initiator": [{"initiator": 1, "sent": 10, "received": 10, "lost": 0, "xmitq_left": 0}],
        "send_rate": 5.0, "receive_rate": 5.0,
        "send_latency_ms": {"count": 10, "mean": 1.0, "p50": 1.0, "p95": 1.0, "p99": 1.0, "max": 1.0},
        "e2e_latency_ms": {"count": 10, "mean": 2.0, "p50": 2.0, "p95": 2.0, "p99": 2.0, "max": 2.0},
        "top_waits": [{"wait_type": "WRITELOG", "wait_time_ms": 5.0, "waiting_tasks": 2, "share": 1.0}],
        "max_xmitq_depth": 3, "max_queue_depth": 1, "activation_tasks_started": 1,
        "activation_tasks_max_running": 1, "client_cpu_percent": 10.0, "server_cpu_percent": 20.0,
        "worker_cpu_percent": {"worker.i1": 10.0}, "client_bound": False, "other_cpu_percent": 3.0,
        "steal_percent": 0.0, "noisy_host": False, "users_expected": 1,
        "users_spawned": 1, "users_active": 1, "errors": 0, "error_samples": [], "collector_errors": [],
        "poison_messages": 0, "queue_disabled": False, "messages_undelivered": 0, "broker_restarts": 0,
        "status": "ok",
    }


def test_a_version_1_summary_reads_into_the_sections_and_round_trips_as_version_2():
    doc = sample_summary()
    s = RepetitionSummary.from_json(doc)
    assert s.latency.send_latency_ms.p99 == 1.0 and s.accounting.per_initiator[0].initiator == 1
    assert s["send_rate"] == 5.0 and s["send_p99_ms"] == 1.0 and s.window.span_seconds == 2.0
    v2 = s.to_json()
    assert v2["schema"] == "ssbench.summary/2" and v2["load"]["send_rate"] == 5.0 and "send_rate" not in v2
    assert RepetitionSummary.from_json(v2) == s and RepetitionSummary.from_json(v2).to_json() == v2


def test_a_summary_is_frozen_and_replaced_by_field_name():
    s = RepetitionSummary.from_json(sample_summary())
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.status = "lost"
    t = s.replace(broker_restarts=2, status="errors", repetition=3)
    assert (t["broker_restarts"], t.status, t.repetition, s["broker_restarts"]) == (2, "errors", 3, 0)


def test_the_flat_row_has_every_axis_field_and_derived_column():
    from harness.results import fields

    row = RepetitionSummary.from_json(sample_summary()).row()
    assert set(fields.columns()) <= set(row) and row["perm_id"] == "i1-t1-per_thread-p100-durable"
    assert row["payload_bytes"] == 100 and row["max_queue_readers"] == 16      # the registry's defaults
    assert row["e2e_p99_ms"] == 2.0 and row["disturbed"] is False and row["alternated"] is False


def test_a_field_used_but_not_declared_is_refused():
    from harness.results import fields

    s = RepetitionSummary.from_json(sample_summary())
    stored = {f.name: s[f.name] for f in fields.FIELDS if not f.path}
    assert RepetitionSummary.of(**stored) == s
    with pytest.raises(ValueError, match="'brand_new_figure' is not declared in harness/results/fields.py"):
        RepetitionSummary.of(**stored, brand_new_figure=1.0)


def test_unknown_fields_are_kept():
    doc = sample_summary() | {"interleave": {"round": 2}}
    assert RepetitionSummary.from_json(doc).to_json()["interleave"] == {"round": 2}


@pytest.mark.parametrize("schema, message", [
    ("ssbench.summary/3", "unsupported schema version 'ssbench.summary/3'"),
    ("ssbench.run/1", "expected ssbench.summary/2"),
])
def test_other_schemas_are_refused_in_one_line(schema, message):
    with pytest.raises(UserError, match=re.escape(message)) as e:
        RepetitionSummary.from_json(sample_summary() | {"schema": schema}, file="x/summary.json")
    assert "\n" not in str(e.value) and "x/summary.json" in str(e.value)


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("messages_lost"), "messages_lost"),
    (lambda d: d.update(send_rate="fast"), "send_rate"),
    (lambda d: d["window"].update(measure_start=None), "window.measure_start"),
    (lambda d: d.update(per_initiator=[{"initiator": "one", "sent": 1, "received": 1, "lost": 0}]),
     "per_initiator[0].initiator"),
    (lambda d: d.update(status="grand"), "status"),
])
def test_malformed_summaries_name_the_field(mutate, field):
    """Named where the document has it: in a version-1 summary at the top level, in a version-2
    one in its section."""
    doc = json.loads(json.dumps(sample_summary()))
    mutate(doc)
    with pytest.raises(UserError) as e:
        RepetitionSummary.from_json(doc, file="s.json")
    assert e.value.field == field


def test_a_malformed_version_2_summary_names_the_section():
    doc = RepetitionSummary.from_json(sample_summary()).to_json()
    doc["load"]["send_rate"] = "fast"
    with pytest.raises(UserError) as e:
        RepetitionSummary.from_json(doc, file="s.json")
    assert e.value.field == "load.send_rate"


def test_run_record_and_permutation_summary_round_trip():
    run = {"schema": "ssbench.run/1", "run_id": "x", "status": "complete", "started": "t",
           "ssbench": {}, "matrix": {}, "target": {}, "software": {}, "host": {}, "argv": [],
           "permutations_done": 1, "permutations_total": 1, "messages_lost": 0}
    assert RunRecord.from_json(run).to_json() == run
    perm = {"schema": "ssbench.permutation/1", "permutation": {"id": "p"}, "repetitions": [1, 2],
            "median": {"send_rate": 1.0, "receive_rate": 1.0, "send_p50_ms": 1.0, "send_p99_ms": 2.0,
                       "e2e_p99_ms": 3.0}, "messages_lost": 0, "errors": 0}
    assert PermutationSummary.from_json(perm).to_json() == perm


def test_docs_results_md_has_the_registrys_field_tables():
    """docs/results.md's field tables are generated from the registry (python -m
    harness.results writes them): a field added to the registry fails this test until
    the page is regenerated."""
    from harness.results import fields

    assert fields.markdown() in DOC, "regenerate: .venv/bin/python -m harness.results"
