"""What limits throughput, and what to try: a diagnosis per permutation (docs/diagnosis.md).

The whitepaper's chain over the summaries' flat rows: a growing queue points downstream of SEND,
else the limit is up to SEND or the offered rate. A repetition's diagnosis is the stage whose
threshold fires, a permutation's its repetitions' majority, each with its remedy; the
thresholds' error rates are simulated in tests/analysis/test_diagnosis.py.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..results import number
from ..results.summary import CLIENT_BOUND_CPU as CLIENT_CPU
from ..results.fields import axis_names
from .tables import category, group_by
from ..results.model import target_capabilities

#: a repetition's flat row (harness.results.fields.flat_row: a summary's row(), or a row of the
#: analysis' repetitions table)
Row = dict[str, Any]

CLEAR, MIXED, NO_DATA = "clear", "mixed", "not enough data"

#: a queue grows when its Theil-Sen slope is at least this share of the SEND rate (the stage
#: after it takes less than 90 % of what arrives) ...
GROWTH_MIN_SHARE = 0.10
#: ... and the low end of the slope's 95 % interval at least this share
GROWTH_CI_MIN_SHARE = 0.03
#: summaries without growth figures: (send - receive) / send at least this much is a backlog
BACKLOG_MIN_SHARE = 0.10
#: client: a Locust worker at the client-bound CPU (CLIENT_CPU, percent of one core), or its
#: busiest thread on a CPU or waiting for one this much
CLIENT_DEMAND = 90.0
#: client: users inside a SEND less than this share of the time (send rate x mean SEND latency
#: / users; closed loop) spend the rest in the load generator
SEND_DUTY_MIN = 0.70
#: SEND: a wait category (lock, page latch, log flush) holding at least this share of the
#: users' time (wait ms per second / 1000 / users): relieving it could gain a third or more
WAIT_MIN_SHARE = 0.25
#: receive vs processing: the readers' time in the procedure's own work (procedure_busy /
#: readers running): processing from the upper figure, receive below the lower, mixed between
PROCESSING_SHARE = (0.35, 0.65)
#: server CPU: a remote server's CPUs (utilization); a local server shares the host, whose
#: CPUs count (host utilization), when it takes more of them than the Locust workers
SERVER_CPU = 0.85
HOST_CPU = 0.90
#: a local server on a busy host: it must take at least this much (percent of a core)
LOCAL_SERVER_MIN_CPU = 25.0
#: SQL Server's latch class for readers waiting in WAITFOR (sys.dm_os_latch_stats)
WAITFOR_LATCH = "SERVICE_BROKER_WAITFOR_MANAGER"
#: its wait per second (ms/s) per reader that makes it the receive stage's reason
WAITFOR_LATCH_MS_PER_READER = 100.0

#: the wait categories (harness.analysis.tables.category) that hold users inside a SEND
SEND_WAITS = ("lock", "page latch", "log flush")


@dataclass(frozen=True)
class Remedy:
    technique: str      # what to do
    axis: str           # how to try it in a matrix
    source: str         # where it comes from


REMEDIES: dict[str, Remedy] = {
    "client": Remedy("more load: more Locust worker processes per initiator, or client hosts",
                     "run.workers_per_initiator (--workers-per-initiator N) or --remote-workers",
                     "paper, Service Broker Test Environment (a test client computer per initiator); "
                     "docs/scale-out.md"),
    "lock_shared": Remedy("one dialog per thread (many conversations)", "dialogs: [per_thread]",
                          "paper, Basic Optimization Techniques: Many Conversations (one conversation's "
                          "sys.sysdesend row is updated by every SEND)"),
    "lock": Remedy("more dialogs, so SENDs do not queue on one conversation's lock",
                   "dialogs: [per_thread, trick150]",
                   "paper, Many Conversations; seed 002, Define Conversation Groups"),
    "page latch": Remedy("the 150 trick, or more dialogs", "dialogs: [trick150]",
                         "paper, Advanced Optimization Techniques: The 150 Trick; Recommendation 5"),
    "log flush": Remedy("DELAYED_DURABILITY or a faster log device (fewer, larger log writes)",
                        "server: a profile with DELAYED_DURABILITY (embedded: delayed)",
                        "paper, Initiator and Target Server Performance (WRITELOG the top wait with the "
                        "150 trick); seed 002, Message Processing loop (the commit's log write)"),
    "send": Remedy("see the wait profile: more dialogs (per_thread, trick150) or delayed durability",
                   "dialogs, server", "paper, Performance and Scalability Techniques"),
    "transmission": Remedy("spread the SENDs over more initiators; check the route, the endpoint and "
                           "sys.transmission_queue.transmission_status",
                           "initiators: [1, 2, 3]",
                           "paper, sys.sysxmitqueue (it must not grow faster than it is processed) and "
                           "Test Results (1 to 3 initiators); seed 003, Message Delivery"),
    "readers": Remedy("more queue readers, with at least as many dialogs", "max_queue_readers: 1-2 per core",
                      "paper, Recommendation 4 (activation tasks per core); seed 004 (conversations "
                      "matched to MAX_QUEUE_READERS)"),
    "one_group": Remedy("more dialogs: one conversation group is received by one reader at a time",
                        "dialogs: [per_thread]",
                        "seed 002, Define Conversation Groups (as many dialogs as reader threads); seed 004"),
    "receive_top": Remedy("RECEIVE TOP (N): many messages per RECEIVE", "receive_top: [1000, 10000]",
                          "paper, Receiving Multiple Messages per Conversation; Recommendation 2; "
                          "seed 002, Message Processing loop"),
    "reuse": Remedy("more messages per dialog (dialog reuse): RECEIVE returns one conversation's messages",
                    "messages_per_dialog: [100, unlimited]",
                    "paper, Recommendation 1 (dialog reuse) and Receiving Multiple Messages per Conversation; "
                    "seed 003 (multiple messages per conversation speed RECEIVE up about 10x); seed 004 (one "
                    "message per conversation: never more than one per RECEIVE)"),
    "waitfor": Remedy("a longer WAITFOR, so activation tasks stay alive between messages",
                      "waitfor_timeout_ms: [1000, 3000]",
                      "paper, Recommendation 3 (activation task lifetime; the queue monitor's 5 s); "
                      "seed 003, Activation"),
    "fewer_readers": Remedy("fewer queue readers: they queue on the WAITFOR manager's latch",
                            "max_queue_readers: fewer",
                            "paper, Recommendation 4 (the number depends on the workload); the latch class "
                            "SERVICE_BROKER_WAITFOR_MANAGER (sys.dm_os_latch_stats)"),
    "processing": Remedy("more readers while below 1-2 per core; else less work per message "
                         "(set-based processing, or the work moved out of the activation procedure)",
                         "max_queue_readers; broker.processing_us_per_message to model the work",
                         "paper, Receive Activation Procedure and Recommendation 4; seed 003, Use set-based "
                         "queries; seed 002, Service location (external activation)"),
    "server CPU": Remedy("more CPU, or less CPU per message: dialog reuse, RECEIVE TOP batching; spread the "
                         "initiators over servers", "initiators (a server each, as the paper's three)",
                         "paper, Initiator and Target Server Performance (CPU 45-50 %); Recommendations 1-2"),
    "offered load": Remedy("raise the offered rate to find the limit", "rate: [higher], or ssbench saturate",
                           "docs/saturate.md"),
}


@dataclass
class Finding:
    """A stage whose evidence crossed its threshold in one repetition."""

    stage: str                   # client, SEND, transmission, receive, processing, server CPU, offered load
    detail: str                  # e.g. "row lock of the shared dialog"
    strength: float              # the figure over its threshold (>= 1)
    evidence: str                # the figures, with units
    remedy: str                  # a key of REMEDIES


@dataclass
class RepDiagnosis:
    rep: int
    stage: str | None
    detail: str
    confidence: str
    findings: list[Finding] = field(default_factory=list)
    reason: str = ""             # why not enough data

    @property
    def primary(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def _lat(s: Row, stat: str) -> float | None:
    return (s["send_latency_ms"] or {}).get(stat)


def _rate(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}"


def _pct(v: float) -> str:
    return f"{100 * v:.0f} %"


# --------------------------------------------------------------------------- one repetition

def _growing(g: Any, send: float) -> bool:
    """The queue grew through the window: slope and the low end of its interval over their shares."""
    return (g is not None and g["per_s"] >= GROWTH_MIN_SHARE * send and g["ci_low"] >= GROWTH_CI_MIN_SHARE * send)


def _growth_text(name: str, g: Any) -> str:
    return (f"the {name} grew {_rate(g['per_s'])} msg/s [95 % CI {_rate(g['ci_low'])}, {_rate(g['ci_high'])}] "
            f"({_rate(g['first'])} -> {_rate(g['last'])} messages)")


def _readers(s: Row) -> tuple[float | None, int | None, str]:
    """The readers running, their limit, and the two in words."""
    running = number(s["activation_tasks_running"])
    limit = s["activation_max_readers"] or s["max_queue_readers"]
    return running, limit, (f"{running:.1f} of {limit} readers running" if running is not None
                            else f"MAX_QUEUE_READERS {limit}")


def _downstream(s: Row, send: float) -> list[Finding]:
    out = []
    if _growing(s["xmitq_depth_growth"], send):
        g = s["xmitq_depth_growth"]
        tr = f"; the transport moved {_rate(s['transport_rate'])} msg/s" if s['transport_rate'] is not None else ""
        out.append(Finding("transmission", "the transmission queue grows", g["per_s"] / (GROWTH_MIN_SHARE * send),
                           f"{_growth_text('transmission queue', g)} while SEND ran {_rate(send)} msg/s{tr}",
                           "transmission"))
    if _growing(s["queue_depth_growth"], send):
        out += _receive_side(s, send)
    if s["xmitq_depth_growth"] is None and s["queue_depth_growth"] is None:   # an older summary: the rates only
        backlog = (send - s["receive_rate"]) / send
        if backlog >= BACKLOG_MIN_SHARE:
            where = "transmission" if (s["max_xmitq_depth"] or 0) > (s["max_queue_depth"] or 0) else "receive"
            out.append(Finding(where, "a backlog (no growth figures in this summary)", backlog / BACKLOG_MIN_SHARE,
                               f"SEND {_rate(send)} msg/s but receive {_rate(s['receive_rate'])} msg/s "
                               f"({_pct(backlog)} behind); deepest queue: the "
                               f"{'transmission' if where == 'transmission' else 'target'} queue",
                               "transmission" if where == "transmission" else "readers"))
    return out


def _receive_side(s: Row, send: float) -> list[Finding]:
    """The target queue grows: the readers' time in the procedure's own work says processing,
    else RECEIVE and activation (which reason, which remedy)."""
    g = s["queue_depth_growth"]
    strength = g["per_s"] / (GROWTH_MIN_SHARE * send)
    base = f"{_growth_text('target queue', g)} while SEND ran {_rate(send)} msg/s"
    running, limit, reader_text = _readers(s)
    busy = number(s["procedure_busy"])
    readers = max(running or 0.0, 1.0) if running is not None else float(limit or 1)
    share = busy / readers if busy is not None else None
    detail, remedy, why = _receive_reason(s)
    proc = f"; the procedure's own work only {_pct(share)} of their time" if share is not None else ""
    per = f"{s['procedure_us_per_message']:,.0f} µs per message" if s['procedure_us_per_message'] else "its work"

    def processing(k: float) -> Finding:
        return Finding("processing", "the activation procedure's own work per message", strength * k,
                       f"{base}; the activation procedure's own work ({per}) kept {busy:.2f} readers busy: "
                       f"{_pct(share)} of the readers' time ({reader_text})", "processing")

    def receive(k: float) -> Finding:
        return Finding("receive", detail, strength * k, f"{base}; {why}{proc}", remedy)

    if share is not None and share >= PROCESSING_SHARE[1]:
        return [processing(1.0)]
    if share is None or share < PROCESSING_SHARE[0]:
        return [receive(1.0)]
    # in between: both fire (mixed), the nearer first
    return [processing(1.0), receive(0.99)] if share >= 0.5 else [receive(1.0), processing(0.99)]


def _receive_reason(s: Row) -> tuple[str, str, str]:
    """(detail, remedy key, evidence) of a receive-bound repetition, in the paper's order."""
    waitfor, monitor = s["waitfor_timeout_ms"], s["monitor_interval_seconds"]
    started = number(s["activation_tasks_started_per_s"]) or 0.0
    latch = (s["broker_waits"] or {}).get(WAITFOR_LATCH, 0.0)
    hits = number(s["activation_task_limit_per_s"])
    at_max = (number(s["activation_at_max_share"]) or 0.0) >= 0.5 or (hits or 0.0) > 0
    per_receive = number(s["messages_per_receive"])
    running, limit, readers = _readers(s)
    if latch and running and latch / running >= WAITFOR_LATCH_MS_PER_READER:
        return ("readers queue on the WAITFOR manager latch", "fewer_readers",
                f"{WAITFOR_LATCH} {latch:,.0f} ms/s over {readers}")
    if started > 0 and waitfor is not None and monitor and waitfor < monitor * 1000:
        return ("activation tasks churn under a short WAITFOR", "waitfor",
                f"{started:.2f} activation tasks started per second; WAITFOR {waitfor} ms is shorter than the "
                f"queue monitor's {monitor:g} s")
    if s["dialogs_shared"] and (limit or 0) > 1:
        return ("one conversation group: one reader at a time", "one_group",
                f"one shared dialog per initiator: its messages are one conversation group ({readers})")
    if per_receive is not None and per_receive < 2 and (s["receive_top"] or 0) < 10:
        return ("one message per RECEIVE", "receive_top",
                f"{per_receive:.1f} messages per RECEIVE (RECEIVE TOP ({s['receive_top']})); {readers}")
    if per_receive is not None and per_receive < 2:
        # RECEIVE takes one conversation's messages: a dialog or two per message leaves it one
        mpd = s["messages_per_dialog"]
        return ("one message per RECEIVE: too few messages per dialog", "reuse",
                f"{per_receive:.1f} data messages per RECEIVE with RECEIVE TOP ({s['receive_top']})"
                + (f" ({mpd} per dialog)" if mpd else "") + f"; {readers}")
    if at_max:
        hit = f", Task Limit Reached {hits:.1f}/s" if hits else ""
        return ("readers at MAX_QUEUE_READERS", "readers", f"{readers}{hit}")
    return ("activation has not started enough readers", "waitfor",
            f"{readers}: the queue monitor starts one per {monitor or 5:g} s")


def _client(s: Row, send: float, closed: bool) -> Finding | None:
    cpu = max([w["cpu_percent"] for w in s["workers"] or () if w.get("cpu_percent") is not None]
              + [v for v in (s["worker_cpu_percent"] or {}).values() if v is not None], default=None)
    demand = number(s["client_cpu_demand"])
    duty = None
    if closed and s["users_active"] and _lat(s, "mean") is not None:
        duty = send * _lat(s, "mean") / 1000.0 / s["users_active"]
    parts, strength = [], 0.0
    if s["client_bound"] and (cpu is None or cpu < CLIENT_CPU):
        parts.append("the repetition was flagged client_bound (a worker process at its CPU limit)")
        strength = 1.0
    if cpu is not None and cpu >= CLIENT_CPU:
        parts.append(f"a Locust worker at {cpu:.0f} % of a core")
        strength = max(strength, cpu / CLIENT_CPU)
    if demand is not None and demand >= CLIENT_DEMAND:
        parts.append(f"its busiest thread on a CPU or waiting for one {demand:.0f} % of the time"
                     + (f" (on a CPU {cpu:.0f} % of a core)" if cpu is not None else ""))
        strength = max(strength, demand / CLIENT_DEMAND)
    workers = sum(v for v in (s["worker_cpu_percent"] or {}).values() if v is not None)
    host = number(s["host_cpu_utilization"])
    if (s["server_on_host"] and host is not None and host >= HOST_CPU and s["server_cpu_percent"]
            and workers >= s["server_cpu_percent"]):
        # the host's CPUs are the limit, and the load generator takes more of them than the server
        parts.append(f"the host's CPUs {_pct(host)} busy and the Locust workers taking more of them "
                     f"({workers:.0f} % of a core) than the database server ({s['server_cpu_percent']:.0f} %)")
        strength = max(strength, min(2.0, workers / max(s["server_cpu_percent"], 1.0)))
    if closed and s["users_expected"] and s["users_active"] < s["users_expected"]:
        parts.append(f"only {s['users_active']} of {s['users_expected']} users sending through the window")
        strength = max(strength, 1.0 + (s["users_expected"] - s["users_active"]) / s["users_expected"])
    if duty is not None and duty < SEND_DUTY_MIN:
        parts.append(f"users inside a SEND {_pct(duty)} of the time ({_rate(send)} msg/s x "
                     f"{_lat(s, 'mean'):.2f} ms / {s['users_active']} users)")
        strength = max(strength, SEND_DUTY_MIN / max(duty, 1e-3))
    if not parts:
        return None
    return Finding("client", "the load generator", strength,
                   "; ".join(parts) + f"; SEND p50 {_lat(s, 'p50') or 0:.2f} ms", "client")


def _wait_rates(s: Row) -> tuple[dict[str, float], dict[str, str], str] | None:
    """The users' waits per wait category, ms per second, the largest wait type of each, and
    where they come from. The sampled sessions of the load (``session_waits``: its own
    sessions, an alternated member's own slices) where the target gives them; else the
    server's cumulative waits (``top_waits``: every session's, an alternated window's every
    member's, per second of the window): their resource wait, the signal wait (runnable,
    waiting for a CPU, inside wait_time_ms) counted as the cpu category."""
    ms: dict[str, float] = {}
    tops: dict[str, str] = {}
    sampled = s["session_waits"] is not None and bool(s["session_wait_samples"])
    if sampled:
        waits = sorted((s["session_waits"] or {}).get("sender", {}).items(), key=lambda kv: -kv[1])
        rates = [(wt, n * 1000.0) for wt, n in waits]
        where = f"the users' sessions, {s['session_wait_samples']} samples"
        if len((s["alternation"] or {}).get("members") or ()) > 1:
            where += " in this strategy's slices"
    else:
        seconds = s["span_seconds"] or 0
        if not s["top_waits"] or not seconds:
            return None
        rates = [(w["wait_type"], (w["wait_time_ms"] - (w.get("signal_wait_ms") or 0.0)) / seconds)
                 for w in s["top_waits"]]
        if s["signal_wait_ms_per_s"]:
            rates.append(("RUNNABLE", s["signal_wait_ms_per_s"]))
        members = len((s["alternation"] or {}).get("members") or ())
        where = f"the alternated window's waits: its {members} strategies' together" if members > 1 else ""
    for wait_type, rate in rates:
        cat = category(wait_type)
        if cat in SEND_WAITS or cat == "cpu":
            ms[cat] = ms.get(cat, 0.0) + rate
            tops.setdefault(cat, wait_type)
    return ms, tops, where


def _send_waits(s: Row) -> Finding | None:
    """The largest SEND-side wait category, when it holds enough of the users' time."""
    users = s["users_active"] or s["users_expected"]
    got = _wait_rates(s) if users else None
    if not got or not got[0]:
        return None
    ms, tops, where = got
    cat = max(ms, key=ms.get)
    share = ms[cat] / 1000.0 / users
    if share < WAIT_MIN_SHARE:
        return None
    if cat == "cpu":        # signal wait: runnable tasks queue for a CPU, not for a lock or the log
        return Finding("server CPU", "tasks waiting for a CPU (signal wait)", share / WAIT_MIN_SHARE,
                       f"signal wait {ms[cat]:,.0f} ms/s ({tops[cat]} the largest): {ms[cat] / 1000:.1f} of "
                       f"{users} users runnable, waiting for a CPU, {_pct(share)} of their time"
                       + (f" ({where})" if where else ""), "server CPU")
    shared = bool(s["dialogs_shared"])
    detail = {"lock": "row lock of the shared dialog" if shared else "lock waits",
              "page latch": "page latch", "log flush": "log flush"}[cat]
    objects = s["page_latch_objects"] or {}
    if cat == "page latch" and objects:
        top = max(objects, key=objects.get)
        detail = f"page latch on {top}"
    text = (f"{cat} waits {ms[cat]:,.0f} ms/s ({tops[cat]} the largest): {ms[cat] / 1000:.1f} of "
            f"{users} users waiting, {_pct(share)} of their time" + (f" ({where})" if where else ""))
    if cat == "page latch" and objects:
        text += "; waiting on " + ", ".join(f"{k} ({v:.1f} tasks)" for k, v in
                                             sorted(objects.items(), key=lambda kv: -kv[1])[:3])
    return Finding("SEND", detail, share / WAIT_MIN_SHARE, text,
                   "lock_shared" if cat == "lock" and shared else cat)


def _server_cpu(s: Row) -> Finding | None:
    local = bool(s["server_on_host"]) and s["server_cpu_percent"] is not None
    own = number(s["server_cpu_utilization"])
    # a local server's CPUs: the host's, or fewer (its affinity, its cgroup's CPU quota)
    util = max(number(s["host_cpu_utilization"]) or 0.0, own or 0.0) if local else own
    limit = HOST_CPU if local else SERVER_CPU
    if util is None or util < limit:
        return None
    if local:
        # the host's CPUs are the limit of whoever takes most of them: the server when it takes
        # more than the Locust workers (else the client stage says so) and a quarter of a core
        workers = sum(v for v in (s["worker_cpu_percent"] or {}).values() if v is not None)
        if s["server_cpu_percent"] < max(workers, LOCAL_SERVER_MIN_CPU):
            return None
        parts = [f"server {s['server_cpu_percent']:.0f} %", f"Locust workers {workers:.0f} %"]
        if s["other_cpu_percent"] is not None:
            parts.append(f"other processes {s['other_cpu_percent']:.0f} %")
        quota, host = number(s["server_cpu_quota"]), number(s["host_cpu_utilization"])
        if host is not None and util == host:
            where = f"the host's {s['host_cpus'] or '?'} CPUs {_pct(util)} busy"
        elif quota:
            where = f"the server's cgroup CPU quota of {quota:g} CPUs {_pct(util)} used"
        else:
            where = f"the CPUs the server may run on (run.pin_cpus) {_pct(util)} busy"
        text = f"{where}, shared with the server ({', '.join(parts)} of a core)"
    else:
        text = f"the busiest database server's CPUs {_pct(util)} busy"
    return Finding("server CPU", "the database server's CPUs", util / limit, text, "server CPU")


def diagnose_rep(s: Row) -> RepDiagnosis:
    """One repetition: every stage whose evidence fires, the strongest first, and the verdict."""
    send = number(s["send_rate"])
    if not send or not s["measure_seconds"]:
        return RepDiagnosis(s["rep"], None, "", NO_DATA, reason="no SEND in the measured window")
    closed = not s["offered_rate"]
    down = _downstream(s, send)
    up = [f for f in (_client(s, send, closed), _send_waits(s), _server_cpu(s)) if f is not None]
    if down:
        top = max(down, key=lambda f: f.strength)
        rivals = [f for f in down if f is not top and f.stage != top.stage]
        findings = [top] + sorted([f for f in down if f is not top] + up, key=lambda f: -f.strength)
        return RepDiagnosis(s["rep"], top.stage, top.detail, MIXED if rivals else CLEAR, findings)
    if not closed and not s["behind"]:
        f = Finding("offered load", "the offered rate", 1.0,
                    f"achieved {_rate(send)} of the {_rate(s['offered_rate'])} SENDs/s offered, and no queue grew",
                    "offered load")
        return RepDiagnosis(s["rep"], f.stage, f.detail, CLEAR, [f] + up)
    if not up:
        if s["xmitq_depth_growth"] is None and not s["top_waits"]:
            return RepDiagnosis(s["rep"], None, "", NO_DATA, reason="no wait, queue or CPU figures")
        f = Finding("SEND", "no wait or CPU limit stands out", 1.0,
                    f"SEND {_rate(send)} msg/s, receive {_rate(s['receive_rate'])} msg/s, no queue grew; no wait "
                    f"category holds {_pct(WAIT_MIN_SHARE)} of the users' time", "send")
        return RepDiagnosis(s["rep"], f.stage, f.detail, MIXED, [f])
    up.sort(key=lambda f: -f.strength)
    # client first: a load generator at its limit caps everything after it
    top = next((f for f in up if f.stage == "client"), up[0])
    rivals = [f for f in up if f is not top and f.strength >= 1.0 and not (
        top.stage == "SEND" and f.stage == "server CPU" and top.strength >= 2.0)]
    return RepDiagnosis(s["rep"], top.stage, top.detail, MIXED if rivals else CLEAR,
                        [top] + [f for f in up if f is not top])


# --------------------------------------------------------------------------- a permutation

@dataclass
class Diagnosis:
    """A permutation's diagnosis over its repetitions."""

    run_id: str
    perm_id: str
    permutation: dict[str, Any]
    reps: int
    stage: str | None
    detail: str
    confidence: str
    evidence: str
    remedy: Remedy | None
    also: str = ""                         # the other stages that fired (mixed)
    rep_stages: list[str] = field(default_factory=list)
    send_rate: float | None = None         # medians over the repetitions
    receive_rate: float | None = None
    target_kind: str = ""
    #: the engine the target emulates Service Broker on (its ``emulation`` capability), if any
    emulation: str | None = None

    @property
    def limit(self) -> str:
        """``stage: detail``, or the confidence when no stage could be named."""
        return f"{self.stage}: {self.detail}" if self.stage else self.confidence


def diagnose_permutation(rows: Iterable[Row], capabilities: dict[str, Any] | None = None) -> Diagnosis:
    """The diagnosis of one permutation's repetitions (flat rows); ``capabilities``: what its
    run's target declared (run.json ``target.capabilities``; default: by the recorded kind)."""
    reps = sorted(rows, key=lambda s: s["rep"])
    if not reps:
        raise ValueError("no repetition to diagnose")
    first = reps[0]
    ds = [diagnose_rep(s) for s in reps]
    named = [d for d in ds if d.stage]
    kind = first["target_kind"]
    base = dict(run_id=first["run_id"], perm_id=first["perm_id"],
                permutation={"index": first["perm_index"], **{k: first[k] for k in axis_names(but=("id", "index"))}},
                reps=len(reps), rep_stages=[d.stage or NO_DATA for d in ds],
                send_rate=statistics.median(s["send_rate"] for s in reps),
                receive_rate=statistics.median(s["receive_rate"] for s in reps), target_kind=kind,
                emulation=(capabilities or target_capabilities({"kind": kind})).get("emulation"))
    if not named:
        return Diagnosis(**base, stage=None, detail="", confidence=NO_DATA,
                         evidence="; ".join(sorted({d.reason for d in ds if d.reason})), remedy=None)
    # the stage most repetitions name, then its kind among them (a tie: the strongest evidence)
    stage = _vote(named, lambda d: d.stage)
    agree = [d for d in named if d.stage == stage]
    detail = _vote(agree, lambda d: d.detail)
    same = sorted((d for d in agree if d.detail == detail), key=lambda d: d.primary.strength)
    typical = same[len(same) // 2]         # the median-strength repetition speaks for them
    clear = len(same) == len(ds) and all(d.confidence == CLEAR for d in same)
    others = sorted({f.stage for d in ds for f in d.findings[1:] if f.strength >= 1.0} - {stage}
                    | {d.stage for d in named if d.stage != stage})
    evidence = typical.primary.evidence
    if len(ds) > 1:
        evidence += f" (rep {typical.rep}; {len(agree)} of {len(ds)} repetitions name {stage})"
    noisy = [s for s in reps if s["noisy_host"]]
    if 2 * len(noisy) > len(reps):       # the figures measured a shared machine: say so
        other = statistics.median(s["other_cpu_percent"] or 0.0 for s in noisy)
        evidence += f"; noisy host: other processes took {other:.0f} % of a core"
    return Diagnosis(**base, stage=stage, detail=detail, confidence=CLEAR if clear else MIXED,
                     evidence=evidence, remedy=remedy_for(typical.primary, first), also=", ".join(others))


def _vote(ds: list[RepDiagnosis], key) -> str:
    """The value of ``key`` most of ``ds`` have; a tie goes to the strongest primary finding."""
    votes = Counter(key(d) for d in ds)
    n = max(votes.values())
    tied = [k for k, v in votes.items() if v == n]
    return max(tied, key=lambda k: max(d.primary.strength for d in ds if key(d) == k))


def remedy_for(f: Finding, s: Row) -> Remedy:
    """The finding's remedy; processing with readers already 2 per core asks for less work."""
    r = REMEDIES[f.remedy]
    if f.stage == "processing":
        _, limit, _ = _readers(s)
        cores = s["host_cpus"] if s["server_on_host"] else None
        if limit and cores and limit >= 2 * cores:
            return Remedy("less work per message: set-based processing, or the work moved out of the "
                          "activation procedure (readers are already 2 per core)", r.axis, r.source)
    return r


def diagnose(rows: Iterable[Row], capabilities: dict[str, dict[str, Any]] | None = None) -> list[Diagnosis]:
    """Every permutation of the given repetitions' flat rows (any number of runs), in the
    matrix's order; ``capabilities``: what each run's target declared, by run id."""
    out = [diagnose_permutation(g, (capabilities or {}).get(run_id))
           for (run_id, _), g in group_by(rows, "run_id", "perm_id").items()]
    return sorted(out, key=lambda d: (d.run_id, d.permutation.get("index") or 0, d.perm_id))


def diagnose_run(path) -> list[Diagnosis]:
    """A run directory's diagnosis (its complete repetitions whose summaries read), read
    through harness.results."""
    from ..errors import UserError
    from ..results import RunReader

    reader = RunReader(path)
    try:
        caps = {reader.run_id: target_capabilities(reader.record().target)} if reader.exists() else None
    except UserError:                     # a damaged run.json: the summaries' kind tells
        caps = None
    return diagnose((s.row() for s in reader.readable_summaries()), caps)
