"""The summary builder: pure, status precedence, accounting (harness.results.summary)."""

from __future__ import annotations

import itertools
import types


from harness.results import Histogram, build_repetition_summary, median, repetition_status, summarize_permutation
from harness.results.fields import DISTURBED_STATUSES, STATUSES, counts_in_verdicts
from harness.results.records import TargetRef
from harness.results.summary import Accounting, ClientRecord, InitiatorAccount, RepetitionData

ORDER = [s for s in STATUSES if s != "ok"]


def conditions(**on):
    base = dict(lost=0, duplicated=0, queue_disabled=False, errors=0, users_active=4, users_expected=4, client_bound=False,
                noisy_host=False, undelivered=0, behind=False, server_frozen=False, receive_stalled=False,
                noisy_storage=False)
    for flag in ("server_frozen", "receive_stalled", "noisy_storage"):
        base[flag] = bool(on.get(flag))
    if on.get("lost"):
        base["lost"] = 3
    if on.get("duplicated"):
        base["duplicated"] = 1
    if on.get("queue_disabled"):
        base["queue_disabled"] = True
    if on.get("errors"):
        base["errors"] = 2
    if on.get("users_idle"):
        base["users_active"] = 3
    if on.get("client_bound"):
        base["client_bound"] = True
    if on.get("undelivered"):
        base["undelivered"] = 5
    if on.get("noisy_host"):
        base["noisy_host"] = True
    if on.get("behind"):
        base["behind"] = True
    return base


def test_status_is_the_first_condition_that_applies():
    """Every combination of the conditions (2^12), in one test."""
    for flags in (c for n in range(len(ORDER) + 1) for c in itertools.combinations(ORDER, n)):
        expected = next((s for s in ORDER if s in flags), "ok")
        assert repetition_status(**conditions(**{f: True for f in flags})) == expected, flags


def data(**over) -> RepetitionData:
    lat = Histogram({1000: 8, 2000: 2})
    d = RepetitionData(
        run_id="run", permutation={"id": "i2-t2-per_thread-p100-durable"}, repetition=1,
        target=TargetRef("embedded", "PostgreSQL emulation", "durable"), warmup_seconds=1.0,
        spawn_complete=99.0, dialogs_created=4, usable_dialogs=4, users_expected=4,
        accounting=Accounting([InitiatorAccount(1, 6, 6, 0), InitiatorAccount(2, 5, 4, 1)]),
        client=ClientRecord(start=100.0, end=102.0, latency=lat, sends_total=11,
                            users_spawned=4, users_active=4),
        e2e_latency=Histogram({5000: 9}),
        collected={"top_waits": [{"wait_type": "WRITELOG", "wait_time_ms": 1.0, "waiting_tasks": 1, "share": 1.0}],
                   "max_xmitq_depth": 7, "client_bound": False, "client_cpu_percent": 12.5})
    for k, v in over.items():
        setattr(d, k, v)
    return d


def test_builder_accounts_per_initiator_and_rates():
    s = build_repetition_summary(data())
    # the one message not received is still in initiator 2's transmission queue: undelivered
    assert s.messages_sent == 11 and s.messages_received == 10 and s.messages_lost == 0
    assert s.messages_undelivered == 1 and s.status == "undelivered" and not s.drained
    assert [(i.initiator, i.xmitq_left) for i in s.per_initiator] == [(1, 0), (2, 1)]
    assert s.send_rate == 5.0 and s.receive_rate == 4.5 and s.window.measure_seconds == 2.0
    assert s.send_latency_ms.p50 == 1.0 and s.send_latency_ms.p99 == 2.0 and s.e2e_latency_ms.count == 9


def test_a_message_neither_received_nor_queued_is_lost():
    s = build_repetition_summary(data(accounting=Accounting([InitiatorAccount(1, 6, 4, 1)])))
    assert s.messages_lost == 1 and s.messages_undelivered == 1 and s.status == "lost"
    assert s.top_waits[0].wait_type == "WRITELOG" and s.max_xmitq_depth == 7 and s.client_cpu_percent == 12.5


def test_poison_messages_are_received_not_lost():
    d = data(accounting=Accounting([InitiatorAccount(1, 5, 4, 0, poison=1)]))
    s = build_repetition_summary(d)
    assert s.messages_lost == 0 and s.poison_messages == 1 and s.status == "ok" and s.drained


def test_a_duplicate_never_hides_a_loss_and_the_initiators_sum_to_the_totals():
    """Initiator 1 lost one message and had another tallied twice: 5 sent, 4 distinct received,
    1 duplicate. A count of tallies (5) would have read 'nothing lost'."""
    a = Accounting([InitiatorAccount(1, 5, 4, duplicates=1), InitiatorAccount(2, 5, 3, queued=1, poison=1)])
    s = build_repetition_summary(data(accounting=a))
    assert (s.messages_lost, s.messages_duplicated, s.messages_undelivered) == (1, 1, 1)
    assert s.status == "lost" and s.poison_messages == 1
    for name, total in (("lost", s.messages_lost), ("sent", s.messages_sent), ("received", s.messages_received),
                        ("poison", s.poison_messages), ("duplicates", s.messages_duplicated)):
        assert sum(getattr(i, name) for i in s.per_initiator) == total, name
    dup = build_repetition_summary(data(accounting=Accounting([InitiatorAccount(1, 5, 5, duplicates=2)])))
    assert dup.messages_lost == 0 and dup.messages_duplicated == 2 and dup.status == "duplicated"


def test_a_phantom_never_hides_a_gap():
    """Initiator 1 sent 5; the target holds 5 distinct messages, one under a sequence number its
    dialog never sent: one message sent is found nowhere. Lost is that gap, per initiator and in
    total, the drain is not settled, and a phantom alone breaks exactly-once like a duplicate."""
    a = Accounting([InitiatorAccount(1, 5, 5, phantoms=1), InitiatorAccount(2, 5, 4, poison=1)])
    assert not a.settled and a.lost == 1 and a.phantoms == 1
    s = build_repetition_summary(data(accounting=a))
    assert (s.messages_lost, s.messages_phantom, s.messages_duplicated, s.status) == (1, 1, 0, "lost")
    assert [(i.lost, i.phantoms) for i in s.per_initiator] == [(1, 1), (0, 0)]
    extra = Accounting([InitiatorAccount(1, 5, 6, phantoms=1)])         # received one never sent, lost none
    assert extra.settled and extra.lost == 0
    only = build_repetition_summary(data(accounting=extra))
    assert (only.messages_lost, only.messages_phantom, only.status) == (0, 1, "duplicated")
    queued = Accounting([InitiatorAccount(1, 5, 3, queued=2, phantoms=1)])   # drain timed out
    assert (queued.lost, queued.undelivered) == (1, 2)


def test_the_summary_is_valid_json_for_its_own_reader():
    from harness.results.model import RepetitionSummary

    s = build_repetition_summary(data())
    assert RepetitionSummary.from_json(s.to_json()) == s


def test_median_and_permutation_summary():
    assert median([3, None, 1, 2]) == 2 and median([None]) is None and median([]) is None
    reps = []
    for i, rate in enumerate([10.0, 30.0, 20.0], start=1):
        d = data(repetition=i, accounting=Accounting([InitiatorAccount(1, 5, 5)]))
        reps.append(build_repetition_summary(d).replace(send_rate=rate))
    p = summarize_permutation({"id": "x"}, reps)
    assert p.repetitions == [1, 2, 3] and p.median["send_rate"] == 20.0 and p.messages_lost == 0


def test_open_loop_offered_and_achieved_rates_and_behind():
    from harness.results.model import RepetitionSummary

    ok = data(accounting=Accounting([InitiatorAccount(1, 10, 10)]), offered_rate=5.0)
    ok.client.latency_corrected = Histogram({1500: 8, 9000: 2})
    s = build_repetition_summary(ok)
    # 10 SENDs in 2 s: the offered 5/s achieved; the corrected latency is reported next to it
    assert s.offered_rate == 5.0 and s.achieved_rate == 5.0 and s.status == "ok"
    assert s.send_latency_corrected_ms.p50 == 1.5 and s.send_latency_corrected_ms.p99 == 9.0
    assert RepetitionSummary.from_json(s.to_json()) == s
    # 10 in 2 s against 5.4/s offered: 7.4% short, beyond the 5% tolerance
    behind = build_repetition_summary(data(accounting=Accounting([InitiatorAccount(1, 10, 10)]), offered_rate=5.4))
    assert behind.status == "behind" and behind.behind and behind.achieved_rate == 5.0
    assert behind.to_json()["load"]["behind"] is True and s.to_json()["load"]["behind"] is False and not s.behind
    # within the tolerance, and a closed loop has no rates at all
    assert build_repetition_summary(data(accounting=Accounting([InitiatorAccount(1, 10, 10)]),
                                         offered_rate=5.2)).status == "ok"
    closed = build_repetition_summary(data(accounting=Accounting([InitiatorAccount(1, 10, 10)])))
    assert closed.offered_rate is None and "offered_rate" not in closed.to_json()["load"]


def test_a_disturbed_window_that_fell_behind_is_disturbed_and_says_it_fell_behind():
    """The CI run of 2026-11-28: four processes fsyncing beside the server slowed its commits to
    11.7 ms, the open loop fell behind, and the window's status was ``behind``, which counts in
    verdicts: a disturbed window counted. The disturbed status wins; the flag keeps the fact."""
    from harness.results.model import RepetitionSummary

    d = data(accounting=Accounting([InitiatorAccount(1, 10, 10)]), offered_rate=5.4)
    d.collected["noisy_storage"] = True
    s = build_repetition_summary(d)
    assert s.status == "noisy_storage" and not counts_in_verdicts(s.status)
    assert s.behind and RepetitionSummary.from_json(s.to_json()).behind
    # the permutation's count of repetitions behind reads the flag, not the status
    assert summarize_permutation({"id": "x"}, [s]).behind == 1


def test_every_disturbed_status_precedes_every_status_that_counts():
    counted = [st for st in STATUSES if counts_in_verdicts(st) and st not in ("lost", "duplicated", "undelivered",
                                                                               "queue_disabled", "errors", "users_idle")]
    assert counted == ["behind", "noisy_host", "client_bound", "ok"]
    assert max(STATUSES.index(st) for st in DISTURBED_STATUSES) < min(STATUSES.index(st) for st in counted)


def test_a_summary_written_before_the_behind_flag_reads_its_status():
    from harness.results.model import RepetitionSummary

    old = build_repetition_summary(data(accounting=Accounting([InitiatorAccount(1, 10, 10)]), offered_rate=5.4))
    v2 = old.to_json()
    v1 = {k: v for k, v in v2.items() if not isinstance(v, dict) or k in ("permutation", "target", "window")}
    for section in ("accounting", "load", "latency", "host", "disturbance", "waits", "queues"):
        v1.update(v2.get(section, {}))
    v1.update(schema="ssbench.summary/1")
    del v1["behind"]
    assert v1["status"] == "behind" and RepetitionSummary.from_json(v1).behind


def test_open_loop_users_without_a_slot_in_the_window_are_not_idle():
    # 1 SEND/s offered over 2 s to 4 users: only 2 of them have a slot in the window
    d = data(accounting=Accounting([InitiatorAccount(1, 2, 2)]), offered_rate=1.0,
             client=ClientRecord(start=100.0, end=102.0, latency=Histogram({1000: 2}),
                                 users_spawned=4, users_active=2))
    assert build_repetition_summary(d).status == "ok"
    d.client.users_active = 1
    assert build_repetition_summary(d).status == "users_idle"


def test_messages_still_in_the_target_queue_are_undelivered_per_initiator_too():
    """Issue 55's figures: the drain stopped with 144 and 126 messages in the target queue.
    They are undelivered, not lost, in each initiator's account as in the total."""
    a = Accounting([InitiatorAccount(1, 1000, 856, queued=144), InitiatorAccount(2, 900, 774, queued=126)],
                   queue_disabled=True)
    s = build_repetition_summary(data(accounting=a))
    assert [(i.lost, i.queued) for i in s.per_initiator] == [(0, 144), (0, 126)]
    assert s.messages_lost == 0 and s.messages_undelivered == 270 and s.status == "undelivered"


def test_the_runners_line_says_why_the_drain_stopped(capsys):
    """A drain that ended because the target queue was disabled never reads as a timeout."""
    from harness.progress import Progress
    from harness.runner import Runner

    def line(disabled: bool) -> str:
        a = Accounting([InitiatorAccount(1, 10, 8, queued=2)], queue_disabled=disabled)
        s = build_repetition_summary(data(accounting=a))
        r = Runner.__new__(Runner)
        r.progress = Progress(total=1, force_plain=True)
        Runner._report(r, types.SimpleNamespace(id="p"), 1, s)
        return capsys.readouterr().err

    assert "2 messages still queued when the target queue was disabled" in line(True)
    assert "2 messages still queued when the drain timed out" in line(False)
