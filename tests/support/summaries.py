"""Repetitions built in the tests, as the flat rows the diagnosis reads (harness.analysis.diagnosis)."""

from __future__ import annotations

from harness.results.model import RepetitionSummary
from harness.results.records import Growth, LatencySummary, TargetRef, TopWait, WorkerResult

T = 5.0   # measured seconds


def summary(rep: int = 1, perm: dict | None = None, waits: dict | None = None, **kw) -> dict:
    """A repetition's flat row at 1,000 msg/s, 8 users all sending, nothing growing, no wait to
    speak of."""
    p = {"id": "i1-t8-per_thread-p100-durable", "index": 1, "initiators": 1, "threads": 8, "total_threads": 8,
         "dialogs": "per_thread", "dialogs_every_n": 1, "dialogs_shared": False, "payload_bytes": 100,
         "server": "durable", "broker": {"max_queue_readers": 4, "receive_top": 10000, "waitfor_timeout_ms": 3000,
                                         "monitor_interval_seconds": 5.0, "high_priority_share": 0.0}}
    p.update(perm or {})
    base = dict(run_id="r", permutation_id=p["id"], repetition=rep, permutation=p,
                target=TargetRef("mssql", "SQL Server 16.0", "durable"),
                warmup_seconds=2, measure_seconds=T, measure_start=0.0, measure_end=T, span_seconds=T, status="ok",
                dialogs_created=8, usable_dialogs=8, messages_sent=5000, messages_sent_client=5000,
                messages_received=5000, messages_lost=0, drained=True, per_initiator=[],
                send_rate=1000.0, receive_rate=1000.0,
                send_latency_ms=LatencySummary(count=5000, mean=8.0, p50=7.0, p95=12.0, p99=15.0, max=20.0),
                e2e_latency_ms=LatencySummary(count=5000, mean=20.0, p50=18.0, p95=30.0, p99=40.0, max=50.0),
                top_waits=[TopWait(w, ms_per_s * T, 100, 0.5) for w, ms_per_s in (waits or {"WRITELOG": 200.0}).items()],
                users_expected=8, users_spawned=8, users_active=8,
                workers=[WorkerResult(initiator=1, worker=1, users=8, users_active=8, sends=5000, cpu_percent=30.0)],
                xmitq_depth_growth=Growth(0.0, -20.0, 20.0, 100, 110, 20), queue_depth_growth=Growth(0.0, -20.0, 20.0, 50, 40, 20),
                transport_rate=1000.0, activation_tasks_running=4.0, activation_max_readers=4,
                activation_at_max_share=0.2, activation_task_limit_per_s=0.0, procedure_us_per_message=50.0,
                procedure_busy=0.05, messages_per_receive=40.0, server_cpu_utilization=0.3, host_cpus=2)
    base.update(kw)
    return RepetitionSummary.of(**base).row()


def grows(per_s: float, low: float | None = None) -> Growth:
    return Growth(per_s, per_s * 0.8 if low is None else low, per_s * 1.2, 100, 100 + per_s * T, 20)


def window(rep_dir, doc: dict):
    """The repetition's samples.jsonl in the window of its summary ``doc`` (:func:`read`), as
    the collectors see it when they summarize (``points``, ``series``: inside the window)."""
    import json
    from pathlib import Path

    from harness.collectors.base import WindowView
    from harness.collectors.samplelog import Sample

    rows = map(json.loads, (Path(rep_dir) / "samples.jsonl").read_text().splitlines())
    return WindowView(doc["measure_start"], doc["measure_end"],
                      [Sample(r["ts"], r["family"], r["metric"], r["key"], r["value"]) for r in rows])


def read(path) -> dict:
    """A written summary.json as the tests read it: the document's top level (its permutation,
    target and window among them) with every field by its flat name (its row)."""
    from harness.results import read_json

    doc = read_json(path)
    return {**doc, **RepetitionSummary.from_json(doc, file=str(path)).row()}


def edit(path, **values) -> None:
    """Rewrite a written summary.json with fields replaced, each by its registry name."""
    from harness.results import read_json, write_json

    write_json(path, RepetitionSummary.from_json(read_json(path), file=str(path)).replace(**values))
