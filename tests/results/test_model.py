"""The results contract: typed summaries round-trip, refuse unknown schema versions, and every
field is documented in docs/results.md."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.results import model
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


def test_repetition_summary_round_trips_exactly():
    doc = sample_summary()
    s = RepetitionSummary.from_json(doc)
    assert s.send_latency_ms.p99 == 1.0 and s.per_initiator[0].initiator == 1
    assert s.to_json() == doc


def test_unknown_fields_are_kept():
    doc = sample_summary() | {"interleave": {"round": 2}}
    assert RepetitionSummary.from_json(doc).to_json()["interleave"] == {"round": 2}


@pytest.mark.parametrize("schema, message", [
    ("ssbench.summary/2", "unsupported schema version 'ssbench.summary/2'"),
    ("ssbench.run/1", "expected ssbench.summary/1"),
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
    doc = json.loads(json.dumps(sample_summary()))
    mutate(doc)
    with pytest.raises(UserError) as e:
        RepetitionSummary.from_json(doc, file="s.json")
    assert e.value.field == field


def test_run_record_and_permutation_summary_round_trip():
    run = {"schema": "ssbench.run/1", "run_id": "x", "status": "complete", "started": "t", "ended": None,
           "ssbench": {}, "matrix": {}, "target": {}, "software": {}, "host": {}, "argv": [],
           "permutations_done": 1, "permutations_total": 1, "messages_lost": 0}
    assert RunRecord.from_json(run).to_json() == run
    perm = {"schema": "ssbench.permutation/1", "permutation": {"id": "p"}, "repetitions": [1, 2],
            "median": {"send_rate": 1.0, "receive_rate": 1.0, "send_p50_ms": 1.0, "send_p99_ms": 2.0,
                       "e2e_p99_ms": 3.0}, "messages_lost": 0, "errors": 0}
    assert PermutationSummary.from_json(perm).to_json() == perm


def _documented_names(cls) -> list[str]:
    names = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        names.append(f.name)
    return names


@pytest.mark.parametrize("cls", [RepetitionSummary, PermutationSummary, RunRecord, model.Window,
                                 model.TargetRef, model.InitiatorResult, model.TopWait,
                                 model.LatencySummary, model.Medians, model.Growth])
def test_every_field_is_documented(cls):
    missing = [n for n in _documented_names(cls) if not re.search(rf'"{n}"', DOC)]
    assert not missing, f"docs/results.md does not document {cls.__name__}: {missing}"
