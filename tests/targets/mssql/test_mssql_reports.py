"""What the SQL Server target reports (issue 31, items 6, 11, 13): the single-instance layout's
caveats in the label and the notes, counters classified by what they count, the commit wait of
an Availability Group kept among the waits, and comments and docs that say what SQL Server
does. Against the recording fake (no SQL Server runs here)."""

from __future__ import annotations

import threading
from pathlib import Path

from harness.matrix import BrokerSettings
from harness.targets.mssql import tsql
from harness.targets.mssql.target import MssqlTarget
from harness.targets.mssql.telemetry import is_benign_wait, parse_perf_counters

REPO = Path(__file__).resolve().parents[3]
SINGLE = REPO / "topologies" / "example-single.yaml"


# --------------------------------------------------------------------------- item 6

def test_single_instance_notes(fake):
    """SEND within one instance bypasses the transmission queue, is fully durable whatever
    DELAYED_DURABILITY says (a cross-database transaction) and is not prioritised (priorities
    order transmission between instances and RECEIVE only): run.json's target.notes and the
    label say so (issue 31, item 6)."""
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.prepare(2, "durable", BrokerSettings())
    d = t.describe()
    layout = ("single instance (no transmission queue; SENDs cross databases: fully durable; priority "
              "orders RECEIVE only)")
    assert layout in t.label
    assert d["label"] == f"SQL Server 16.0.4135.4, {layout}, dialog security: full (never encrypted within one instance)"
    queue, durable, priority = d["notes"]
    assert "bypassing the transmission queue" in queue and "initiator-side bottleneck" in queue
    assert "fully durable whatever DELAYED_DURABILITY says" in durable and "Control Transaction Durability" in durable
    assert "not used" in priority and "CREATE BROKER PRIORITY" in priority and "RECEIVE" in priority
    import json

    from harness.redact import redact

    assert json.loads(json.dumps(redact(d)))["notes"] == d["notes"]


# --------------------------------------------------------------------------- item 11

def test_broker_totals_are_cumulative_whatever_their_cntr_type():
    """cntr_type 65792 is "the last observed value" for Tasks Running and for SQL SEND Total
    alike: the kind comes from the counter's name."""
    rows = [
        ("SQLServer:Broker Statistics", "SQL SEND Total", "", 5000, 65792),
        ("SQLServer:Broker Statistics", "Enqueued Messages Total", "", 4000, 65792),
        ("SQLServer:Broker Statistics", "Broker Transaction Rollbacks", "", 3, 65792),
        ("SQLServer:Broker Statistics", "Dialog timer event count", "", 12, 65792),
        ("SQLServer:Broker Activation", "Task Limit Reached", "db", 7, 65792),
        ("SQLServer:Broker Activation", "Tasks Running", "db", 4, 65792),
        ("SQLServer:Broker Activation", "Tasks Started/sec", "db", 17, 272696576),
        ("SQLServer:Broker/DBM Transport", "Receive I/O Bytes Total", "", 9, 65792),
        ("SQLServer:Broker/DBM Transport", "Msg Fragment Send Size Avg", "", 9, 1073874176),
        ("SQLServer:Broker/DBM Transport", "Msg Fragment Send Size Avg Base", "", 9, 1073939712),
        ("SQLServer:Broker TO Statistics", "Avg. Time Between Batches (ms)", "", 9, 1073874176),
    ]
    kinds = {c.counter_name: c.kind for c in parse_perf_counters(rows)}
    assert kinds == {"SQL SEND Total": "cumulative", "Enqueued Messages Total": "cumulative",
                     "Broker Transaction Rollbacks": "cumulative", "Dialog timer event count": "gauge",
                     "Task Limit Reached": "cumulative", "Tasks Running": "gauge",
                     "Tasks Started/sec": "cumulative", "Receive I/O Bytes Total": "cumulative"}


def test_the_availability_group_commit_wait_is_reported():
    assert not is_benign_wait("HADR_SYNC_COMMIT")
    for idle in ("HADR_WORK_QUEUE", "HADR_TIMER_TASK", "HADR_NOTIFICATION_DEQUEUE"):
        assert is_benign_wait(idle)


# --------------------------------------------------------------------------- item 13

def test_comments_and_docs_say_what_sql_server_does():
    prio = tsql.section("objects", "priority_objects")
    assert "Honoured\n-- only where HONOR_BROKER_PRIORITY is ON" not in prio
    assert "RECEIVE\n-- always takes higher-priority conversations first" in prio
    states = tsql.section("collectors", "endpoint_states")
    assert "its initiator endpoint\n-- is deleted; only the target's CLOSED endpoint lingers" in states
    matrices = " ".join((REPO / "docs" / "matrices.md").read_text().split())
    assert "honoured when the database's `HONOR_BROKER_PRIORITY` is ON" not in matrices
    assert "RECEIVE always takes the higher-priority conversations first" in matrices


# --------------------------------------------------------------------------- items 1 and 7, in the summary

def test_the_dialog_counts_reach_the_summary(fake):
    """SQL Server cannot count the Errors it discards (errors_lost is None): the dialogs
    family's summary fields still carry what it can count (int(None) dropped them all)."""
    from harness.collectors.base import SampleContext, WindowView
    from harness.collectors.dialogs import DialogCollector

    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.prepare(1, "durable", BrokerSettings())
    ctx = SampleContext(target=t, lock=threading.Lock())
    out = DialogCollector().summary_fields(ctx, WindowView(0.0, 1.0, ()))   # no tick: no window count
    assert out["dialogs_begun"] == out["dialogs_ended"] == out["dialog_errors_received"] == 0
    assert "dialog_errors_lost" not in out and isinstance(out["endpoints"], dict)
