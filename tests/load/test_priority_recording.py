"""Per-priority SEND latency (a ``priority`` axis): the worker's recorder keeps the SENDs of
high- and normal-priority dialogs apart, the window merge cuts and merges them like the overall
histogram, and the summary carries ``send_latency_high_ms`` / ``send_latency_normal_ms``.

The priority axis runs only on the SQL Server target (the embedded target does not emulate
priority), and no SQL Server exists here: this drives the real recorder, its real files and
the real merge and summary code, with SENDs recorded by hand instead of by Locust users."""

from __future__ import annotations

import json

from harness.load.recorder import Recorder
from support.recording import write_recording
from harness.load.window import merge_workers
from harness.matrix import high_priority_slot
from harness.results import Histogram, build_repetition_summary
from harness.results.model import RepetitionSummary
from harness.results.records import TargetRef
from harness.results.summary import Accounting, ClientRecord, InitiatorAccount, RepetitionData


def data() -> RepetitionData:
    return RepetitionData(
        run_id="run", permutation={"id": "i1-t2-per_thread-p100-sql-hp0.5"}, repetition=1,
        target=TargetRef("mssql", "SQL Server", "sql"), warmup_seconds=1.0, spawn_complete=99.0,
        dialogs_created=2, usable_dialogs=2, users_expected=2,
        accounting=Accounting([InitiatorAccount(1, 8, 8, 0)]),
        client=ClientRecord(start=100.0, end=102.0, latency=Histogram({1000: 3, 8000: 5}),
                            sends_total=8, users_spawned=2, users_active=2),
        e2e_latency=Histogram({5000: 8}))


def test_priority_histograms_cut_to_the_window_and_merged(tmp_path):
    files = []
    for initiator in (1, 2):
        rec = Recorder(initiator, bucket_seconds=0.1)
        for slot in range(1, 5):                    # share 0.5: slots 2 and 4 are high
            prio = "high" if high_priority_slot(slot, 0.5) else "normal"
            ms = 2 if prio == "high" else 9
            for t in (99.0, 100.05, 100.5, 101.2, 105.0):   # 99 and 105 outside [100, 102)
                rec.record_many([(t, ms / 1000, None, None)], priority=prio)
        rec.record_many([(100.3, 0.001, RuntimeError("refused"), None)], priority="high")   # an error: no latency
        rec.record_many([(100.3, 0.004, None, None)])   # a SEND without priority (no axis): overall only
        files.append(write_recording(rec, tmp_path))
    assert set(json.loads(files[0].read_text())["priority"]) == {"high", "normal"}
    wd = merge_workers(files, 100.0, 102.0)
    high, normal = wd.latency_by_priority["high"], wd.latency_by_priority["normal"]
    assert high.count == normal.count == 2 * 2 * 3      # 2 workers x 2 slots x 3 in the window
    assert wd.latency.count == high.count + normal.count + 2
    assert high.summary_ms()["p99"] < normal.summary_ms()["p99"]


def test_summary_carries_per_priority_send_latency(tmp_path):
    d = data()
    d.client.latency_by_priority = {"high": Histogram({1000: 3}), "normal": Histogram({8000: 5})}
    s = build_repetition_summary(d)
    assert s.send_latency_high_ms.count == 3 and s.send_latency_normal_ms.count == 5
    assert s.send_latency_high_ms.p50 < s.send_latency_normal_ms.p50
    assert RepetitionSummary.from_json(s.to_json()) == s
    d.e2e_latency_by_priority = {"high": Histogram({4000: 3}), "normal": Histogram()}
    s = build_repetition_summary(d)
    assert s.e2e_latency_high_ms.p50 == 4.0 and s.e2e_latency_normal_ms.count == 0
    assert RepetitionSummary.from_json(s.to_json()) == s
    plain = build_repetition_summary(data())
    assert plain.send_latency_high_ms is None and "send_latency_high_ms" not in plain.to_json()
