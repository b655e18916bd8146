"""Test matrices: a YAML file of axes and run settings, validated and expanded to permutations.

A matrix names axes (lists of values); the permutations are their cartesian product in a fixed
order (initiators outermost, then threads stepping up, then dialog strategy, payload, server and
any optional broker axes), each with a stable, readable id such as
``i3-t50-trick150-p8192-sql2008``; with ``cases:``, each case's product in turn, its name ending
the ids. See ``docs/matrices.md`` for the format.

Every user error names the file, the line and the field, and is raised as
:class:`harness.errors.UserError` (exit code 2, no traceback).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass, field, replace as _replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from .dialogstrategy import DialogStrategy
from .errors import UserError, show
from .yamlsrc import Located, load_located, unwrap

MAX_PAYLOAD_BYTES = 2 ** 31 - 1  # SQL Server's varbinary(max) limit: 2 GB - 1
SERVER_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")


# --------------------------------------------------------------------------- settings

@dataclass(frozen=True)
class RunSettings:
    warmup_seconds: float = 10.0
    measure_seconds: float = 60.0
    repetitions: int = 1
    drain_timeout_seconds: float = 120.0
    sample_interval_seconds: float = 1.0
    spawn_rate: float = 50.0  # Locust users started per second per run
    #: ``interleaved``: repetition 1 of every permutation, then repetition 2 of every
    #: permutation, ... (A B A B: drift hits every permutation alike); ``sequential``: every
    #: repetition of a permutation before the next (A A B B)
    order: str = "interleaved"
    #: pin the database server and the load generator to separate CPUs (where the host allows)
    pin_cpus: bool = False
    #: open loop (a ``rate`` axis): a repetition whose achieved SEND rate falls short of the
    #: offered one by more than this fraction is flagged ``behind``
    rate_tolerance: float = 0.05
    #: backlog drain (docs/matrices.md): > 0 fills the target queue with this many messages
    #: with activation off, then turns activation on and measures the drain
    backlog_messages: int = 0
    #: Locust worker processes per initiator; each takes threads / N of its initiator's users
    #: (every value of axes.threads must be a multiple of it)
    workers_per_initiator: int = 1


@dataclass(frozen=True)
class BrokerSettings:
    max_queue_readers: int = 16          # ALTER QUEUE ... ACTIVATION (MAX_QUEUE_READERS = n)
    receive_top: int = 10000             # RECEIVE TOP (n) in the activation procedure
    waitfor_timeout_ms: int = 3000       # WAITFOR (RECEIVE ...), TIMEOUT n
    monitor_interval_seconds: float = 5.0  # queue monitor period (fixed at 5 s on SQL Server)
    #: share of dialogs begun at high priority (a ``priority`` axis, SQL Server target only):
    #: 0 = none; 0.5 = every other dialog on the high-priority contract/service pair that
    #: CREATE BROKER PRIORITY ... PRIORITY_LEVEL = 10 matches (docs/matrices.md)
    high_priority_share: float = 0.0
    #: the activation procedure's own work per message (both targets): after each RECEIVE it
    #: waits rows x this many microseconds inside its transaction, as a procedure doing I/O or
    #: a remote call per message would (docs/diagnosis.md, docs/matrices.md)
    processing_us_per_message: int = 0
    #: emulation knobs, embedded target only (docs/embedded.md, "Building a bottleneck"): the
    #: transport moves at most this many messages per second per initiator (0: no limit), and
    #: every SEND first costs its Locust worker process this much CPU (0: none)
    transport_rate_limit: float = 0.0
    client_cpu_us_per_send: int = 0


#: broker settings written only when not their default, so the values of every permutation and
#: matrix that does not use them stay what they were (a gate comparing with an older baseline)
OPTIONAL_BROKER = {"processing_us_per_message": 0, "transport_rate_limit": 0.0, "client_cpu_us_per_send": 0}


def broker_values(b: BrokerSettings) -> dict[str, Any]:
    """``b`` as plain data (summaries, run.json) without the optional settings at their default."""
    return {k: v for k, v in asdict(b).items() if k not in OPTIONAL_BROKER or v != OPTIONAL_BROKER[k]}


RUN_FIELDS = {
    "warmup_seconds": (float, 0, 86_400),
    "measure_seconds": (float, 0.5, 86_400),
    "repetitions": (int, 1, 1000),
    "drain_timeout_seconds": (float, 1, 86_400),
    "sample_interval_seconds": (float, 0.05, 3600),
    "spawn_rate": (float, 0.1, 100_000),
    "order": (str, ("interleaved", "sequential"), None),
    "pin_cpus": (bool, None, None),
    "rate_tolerance": (float, 0.0, 1.0),
    "backlog_messages": (int, 0, 100_000_000),
    "workers_per_initiator": (int, 1, 64),
}
RUN_ORDERS = ("interleaved", "sequential")
BROKER_FIELDS = {
    "max_queue_readers": (int, 1, 32_767),
    "receive_top": (int, 1, 1_000_000),
    "waitfor_timeout_ms": (int, 0, 3_600_000),
    "monitor_interval_seconds": (float, 0.05, 3600),
    "high_priority_share": (float, 0.0, 1.0),
    "processing_us_per_message": (int, 0, 1_000_000),    # 1 s per message: a RECEIVE of 10,000 waits < 24 h
    "transport_rate_limit": (float, 0.0, 10_000_000.0),
    "client_cpu_us_per_send": (int, 0, 1_000_000),
}

# Axes: required ones first, in expansion order; optional broker axes override BrokerSettings.
REQUIRED_AXES = ("initiators", "threads", "dialogs", "payload_bytes", "server")
OPTIONAL_AXES = ("max_queue_readers", "receive_top", "waitfor_timeout_ms", "priority", "processing_us_per_message")
#: optional axes named differently from the BrokerSettings field they set
AXIS_FIELDS = {"priority": "high_priority_share"}
#: axes only some target kinds implement (the embedded target does not emulate priority)
TARGET_AXES = {"priority": ("mssql",)}
#: broker settings only some target kinds implement (nonzero elsewhere is refused)
TARGET_SETTINGS = {"high_priority_share": (("mssql",), "priority"),
                   "transport_rate_limit": (("embedded",), "a transport rate limit"),
                   "client_cpu_us_per_send": (("embedded",), "a client CPU cost per SEND")}

#: optional load axes: ``rate`` is the offered SENDs per second per initiator (open loop,
#: docs/matrices.md); absent, every user sends as fast as its SEND returns (closed loop)
LOAD_AXES = ("rate",)
MAX_RATE = 1_000_000.0
#: optional dialog-lifetime axes (docs/matrices.md, "Conversation lifetime"):
#: ``messages_per_dialog`` (1, N or ``unlimited``: messages a dialog carries before the sender
#: retires it and begins a new one) and ``fire_and_forget`` (true: the initiator ENDs a retired
#: dialog right after its last SEND instead of waiting for the target's EndDialog). Absent, a
#: dialog is reused for the whole run (``unlimited``) and ids are unchanged.
DIALOG_AXES = ("messages_per_dialog", "fire_and_forget")
MAX_MESSAGES_PER_DIALOG = 1_000_000_000
# (the activation helper's waitfor_timeout_ms / priority axes go beside OPTIONAL_AXES)
AXIS_TOKENS = {"initiators": "i", "threads": "t", "payload_bytes": "p",
               "max_queue_readers": "r", "receive_top": "top", "waitfor_timeout_ms": "wf",
               "priority": "hp", "processing_us_per_message": "proc"}
ALL_AXES = REQUIRED_AXES + OPTIONAL_AXES + LOAD_AXES + DIALOG_AXES
TOP_KEYS = {"name", "description", "axes", "run", "broker", "embedded_profiles", "cases"}
#: a case (``cases:``, docs/matrices.md): permutations built on purpose, each the matrix's axes
#: with some replaced and its broker settings overridden; its name ends the permutation ids
CASE_KEYS = {"name", "description", "axes", "broker"}
CASE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def high_priority_permille(share: float) -> int:
    """The share of dialogs at high priority in thousandths (what the SQL Server target's
    ssbench_create_dialogs takes, so both sides agree in integer arithmetic)."""
    return max(0, min(1000, round(share * 1000)))


def high_priority_slot(slot: int, share: float) -> bool:
    """Is dialog slot ``slot`` (1-based) begun at high priority? ``share`` of the slots are,
    spread evenly (0.5: slots 2, 4, 6, ...); the same rule as workloads/mssql/initiator.sql."""
    p = high_priority_permille(share)
    return slot * p // 1000 > (slot - 1) * p // 1000


# --------------------------------------------------------------------------- permutations

@dataclass(frozen=True)
class Permutation:
    index: int                 # 1-based position in the matrix's order
    initiators: int
    threads: int               # client threads (Locust users) per initiator
    dialogs: DialogStrategy
    payload_bytes: int
    server: str                # server profile name
    broker: BrokerSettings

    @property
    def id(self) -> str:
        parts = [f"i{self.initiators}", f"t{self.threads}", self.dialogs.token,
                 f"p{self.payload_bytes}", self.server]
        return ("-".join(parts) + self._broker_suffix + (f"-rate{self.rate:g}" if self.rate else "")
                + self._dialog_suffix + ("-ff" if self.fire_and_forget else "")
                + (f"-{self.case}" if self.case else ""))

    # set by Matrix for permutations whose broker axes were given explicitly
    _broker_suffix: str = field(default="", compare=False, repr=False)
    #: set by Matrix when a messages_per_dialog axis is given (``-mpd1``, ``-mpdunlimited``)
    _dialog_suffix: str = field(default="", compare=False, repr=False)
    #: offered SENDs per second per initiator (open loop); None: closed loop
    rate: float | None = None
    #: messages per dialog before the sender ends it and begins a new one; None: unlimited (reuse)
    messages_per_dialog: int | None = None
    #: the initiator ENDs a retired dialog right after its last SEND (fire and forget)
    fire_and_forget: bool = False
    #: the matrix case (``cases:``) this permutation belongs to; None: a matrix without cases
    case: str | None = None

    @property
    def total_threads(self) -> int:
        return self.initiators * self.threads

    def values(self) -> dict[str, Any]:
        """The permutation as plain data (what summary.json records)."""
        return {
            "id": self.id, "index": self.index, "initiators": self.initiators,
            "threads": self.threads, "total_threads": self.total_threads,
            "dialogs": self.dialogs.token, "dialogs_every_n": self.dialogs.every_n,
            "dialogs_shared": self.dialogs.shared, "payload_bytes": self.payload_bytes,
            "server": self.server, "broker": broker_values(self.broker),
            **({"case": self.case} if self.case else {}),
            **({"rate": self.rate, "offered_rate": self.rate * self.initiators} if self.rate else {}),
            # dialog lifetime, only when not the default (unlimited reuse, not fire and forget),
            # so the values of every other permutation stay what they were (a gate comparing
            # with an older baseline sees the same settings): absent / null = the default
            **({"messages_per_dialog": self.messages_per_dialog, "fire_and_forget": self.fire_and_forget}
               if self.messages_per_dialog or self.fire_and_forget else {}),
        }


@dataclass(frozen=True)
class Case:
    """One entry of a matrix's ``cases:``: permutations built on purpose, the matrix's axes with
    ``axes`` replacing some of them, on ``broker`` (the matrix's settings, overridden)."""

    name: str
    description: str
    axes: dict[str, list[Any]]
    broker: BrokerSettings


@dataclass
class Matrix:
    path: Path
    name: str
    description: str
    axes: dict[str, list[Any]]
    run: RunSettings
    broker: BrokerSettings
    embedded_profiles: dict[str, str]
    sha256: str
    #: ``cases:`` (docs/matrices.md): when given, the permutations are each case's, in order
    cases: list[Case] = field(default_factory=list)
    #: the line of each value (``axes.server[1]``, ``embedded_profiles.x``), for later messages
    lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return sum(1 for _ in self.permutations())

    def groups(self) -> list[tuple[str | None, str, dict[str, list[Any]], BrokerSettings]]:
        """(case name, field prefix, axes, broker settings) of each group of permutations: the
        matrix itself, or each of its cases."""
        if not self.cases:
            return [(None, "", self.axes, self.broker)]
        return [(c.name, f"cases[{k}].", {**self.axes, **c.axes}, c.broker) for k, c in enumerate(self.cases)]

    def axis_items(self, axis: str) -> Iterator[tuple[str, Any]]:
        """(field, value) of every value an axis takes in some permutation (``axes.server[0]``,
        ``cases[1].axes.server[0]``)."""
        if not self.cases or any(axis not in c.axes for c in self.cases):
            for i, v in enumerate(self.axes.get(axis, [])):
                yield f"axes.{axis}[{i}]", v
        for k, c in enumerate(self.cases):
            for i, v in enumerate(c.axes.get(axis, [])):
                yield f"cases[{k}].axes.{axis}[{i}]", v

    def permutations(self) -> Iterator[Permutation]:
        index = 0
        for case, _, axes, base in self.groups():
            names = list(REQUIRED_AXES) + [a for a in OPTIONAL_AXES + LOAD_AXES + DIALOG_AXES if a in axes]
            combos = (dict(zip(names, combo)) for combo in itertools.product(*(axes[a] for a in names)))
            # fire and forget ends retired dialogs: with unlimited reuse no dialog is retired, so
            # that combination would repeat its fire_and_forget=false twin; it is left out
            combos = (v for v in combos if not (v.get("fire_and_forget") and v.get("messages_per_dialog") is None))
            for values in combos:
                index += 1
                broker = base
                suffix = ""
                for axis in OPTIONAL_AXES:
                    if axis in values:
                        broker = _replace(broker, **{AXIS_FIELDS.get(axis, axis): values[axis]})
                        v = values[axis]
                        suffix += f"-{AXIS_TOKENS[axis]}{v:g}" if isinstance(v, float) else f"-{AXIS_TOKENS[axis]}{v}"
                yield Permutation(index=index, initiators=values["initiators"], threads=values["threads"],
                                  dialogs=values["dialogs"], payload_bytes=values["payload_bytes"],
                                  server=values["server"], broker=broker, _broker_suffix=suffix,
                                  rate=values.get("rate"), messages_per_dialog=values.get("messages_per_dialog"),
                                  fire_and_forget=bool(values.get("fire_and_forget", False)),
                                  _dialog_suffix=_mpd_token(values["messages_per_dialog"])
                                  if "messages_per_dialog" in values else "", case=case)

    def schedule(self) -> list[tuple[Permutation, int]]:
        """Every (permutation, repetition) in the order the run executes them (``run.order``)."""
        perms = list(self.permutations())
        reps = range(1, self.run.repetitions + 1)
        if self.run.order == "sequential":
            return [(p, r) for p in perms for r in reps]
        return [(p, r) for r in reps for p in perms]

    def profile_aliases(self, target_kind: str) -> dict[str, str]:
        """Server names mapped to a target kind's own profiles (the matrix's
        ``embedded_profiles`` for the embedded target; none for others)."""
        return dict(self.embedded_profiles) if target_kind == "embedded" else {}

    def check_servers(self, target_kind: str, profiles: Iterable[str]) -> None:
        """Every value of ``axes.server`` names one of the target's server profiles (through
        ``embedded_profiles`` for the embedded target); UserError at that value's line if not.
        Needs no connection: the commands call it before anything is created. An axis the
        target kind does not implement (:data:`TARGET_AXES`) is refused the same way."""
        for axis, kinds in TARGET_AXES.items():
            used = [fld for fld, v in self.axis_items(axis) if v]
            if target_kind not in kinds and used:
                fld = used[0]
                raise UserError(f"the {target_kind} target does not emulate {axis} (only "
                                f"{', '.join(kinds)} does; docs/matrices.md): drop the axis or use 0",
                                file=str(self.path), line=self.lines.get(fld), field=fld)
        for _, prefix, _, broker in self.groups():
            for name, (kinds, what) in TARGET_SETTINGS.items():
                fld = f"{prefix}broker.{name}"
                if target_kind not in kinds and getattr(broker, name):
                    raise UserError(f"the {target_kind} target does not emulate {what} (only "
                                    f"{', '.join(kinds)} does; docs/matrices.md)", file=str(self.path),
                                    line=self.lines.get(fld, self.lines.get(f"broker.{name}")), field=fld)
        known = list(profiles)
        aliases = self.profile_aliases(target_kind)
        for fld, server in self.axis_items("server"):
            profile = aliases.get(server, server)
            if profile in known:
                continue
            via = f" (embedded_profiles maps it to {show(profile)})" if profile != server else ""
            raise UserError(f"server profile {show(server)}{via} is not defined for the {target_kind} "
                            f"target (it has: {', '.join(known) or 'none'})",
                            file=str(self.path), line=self.lines.get(fld), field=fld)

    def set_workers_per_initiator(self, n: int, flag: str = "--workers-per-initiator") -> None:
        """Override ``run.workers_per_initiator`` (a command-line flag); every threads value
        must split evenly over the ``n`` worker processes."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= RUN_FIELDS["workers_per_initiator"][2]:
            raise UserError(f"must be an integer between 1 and {RUN_FIELDS['workers_per_initiator'][2]}, got {n!r}",
                            field=flag)
        for fld, t in self.axis_items("threads"):
            if t % n:
                raise UserError(f"{t} threads do not split evenly over {flag} {n} worker processes "
                                "(use a divisor of every threads value)", file=str(self.path),
                                line=self.lines.get(fld), field=fld)
        self.run = _replace(self.run, workers_per_initiator=n)

    def to_dict(self) -> dict[str, Any]:
        axes = _axes_dict(self.axes)
        return {"name": self.name, "description": self.description, "file": str(self.path),
                "sha256": self.sha256, "axes": axes, "run": asdict(self.run),
                "broker": broker_values(self.broker), "embedded_profiles": dict(self.embedded_profiles),
                **({"cases": [{"name": c.name, "description": c.description, "axes": _axes_dict(c.axes),
                               "broker": broker_values(c.broker)} for c in self.cases]} if self.cases else {}),
                "permutations": len(self)}


def _axes_dict(axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {k: [v.token if isinstance(v, DialogStrategy) else
                ("unlimited" if k == "messages_per_dialog" and v is None else v) for v in vs]
            for k, vs in axes.items()}


def _mpd_token(n: int | None) -> str:
    return f"-mpd{n}" if n else "-mpdunlimited"


# --------------------------------------------------------------------------- loading

def load_matrix(path: str | Path, embedded_profiles: Iterable[str] | None = None) -> Matrix:
    """Load, validate and return a matrix; raises UserError naming file, line and field.

    ``embedded_profiles`` are the embedded target's profile names, against which the matrix's
    ``embedded_profiles`` mapping is checked (the commands pass them; this module knows no
    target)."""
    p = Path(path)
    file = str(path)
    top, sha256 = load_located(p, "matrix")
    doc: dict[str, Located] = top.value

    def err(msg: str, loc: Located | None, fld: str) -> UserError:
        return UserError(msg, file=file, line=loc.line if loc else top.line, field=fld)

    for key, loc in doc.items():
        if key not in TOP_KEYS:
            raise err(f"unknown key (expected one of {', '.join(sorted(TOP_KEYS))})", loc, key)

    name = _str_field(doc, "name", p.stem, err)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name):
        raise err("must be 1-64 letters, digits, '_', '-' or '.'", doc.get("name"), "name")
    description = _str_field(doc, "description", "", err)

    if "axes" not in doc:
        raise err("missing (the matrix needs axes: initiators, threads, dialogs, payload_bytes, server)",
                  None, "axes")
    lines: dict[str, int] = {}
    axes = _axes(doc["axes"], "axes", err, lines, required=True)
    run = RunSettings(**_settings(doc, "run", RUN_FIELDS, err))
    broker = BrokerSettings(**_settings(doc, "broker", BROKER_FIELDS, err))
    if "broker" in doc and isinstance(doc["broker"].value, dict):
        lines.update({f"broker.{k}": item.line for k, item in doc["broker"].value.items()})
    m = Matrix(path=p, name=name, description=description, axes=axes, run=run, broker=broker,
               embedded_profiles={}, sha256=sha256, cases=_cases(doc, broker, err, lines), lines=lines)
    if run.workers_per_initiator > 1:
        for fld, t in m.axis_items("threads"):
            if t % run.workers_per_initiator:
                raise UserError(f"{t} threads do not split evenly over run.workers_per_initiator = "
                                f"{run.workers_per_initiator} worker processes (every threads value must be a "
                                "multiple of it)", file=file, line=lines.get(fld), field=fld)
    servers = {v for _, v in m.axis_items("server")}
    if "embedded_profiles" in doc:
        ploc = doc["embedded_profiles"]
        if not isinstance(ploc.value, dict):
            raise err("must map server names to embedded profiles (durable, delayed), got "
                      f"{type(ploc.value).__name__}", ploc, "embedded_profiles")
        known = list(embedded_profiles) if embedded_profiles is not None else None
        for key, loc in ploc.value.items():
            if key not in servers:
                raise err("not a value of axes.server", loc, f"embedded_profiles.{key}")
            if not isinstance(loc.value, str):
                raise err(f"an embedded profile is a name, got {type(loc.value).__name__}", loc,
                          f"embedded_profiles.{key}")
            if known is not None and loc.value not in known:
                raise err(f"unknown embedded profile {show(loc.value)} (expected {', '.join(known)})",
                          loc, f"embedded_profiles.{key}")
            m.embedded_profiles[key] = loc.value
            lines[f"embedded_profiles.{key}"] = loc.line
    return m


def _axes(axes_loc: Located, prefix: str, err, lines: dict[str, int], required: bool) -> dict[str, list[Any]]:
    """The axes mapping at ``prefix`` (``axes``, ``cases[0].axes``): each a non-empty list of valid,
    distinct values; every required axis present when ``required``."""
    if not isinstance(axes_loc.value, dict):
        raise err("must be a mapping of axis name to a list of values", axes_loc, prefix)
    for key, loc in axes_loc.value.items():
        if key not in ALL_AXES:
            raise err(f"unknown axis (expected {', '.join(ALL_AXES)})", loc, f"{prefix}.{key}")
    axes: dict[str, list[Any]] = {}
    for axis in ALL_AXES:
        fld = f"{prefix}.{axis}"
        if axis not in axes_loc.value:
            if required and axis in REQUIRED_AXES:
                raise err("missing axis", axes_loc, fld)
            continue
        loc = axes_loc.value[axis]
        if not isinstance(loc.value, list):
            raise err("must be a list of values", loc, fld)
        if not loc.value:
            raise err("empty axis: give at least one value", loc, fld)
        values = []
        for i, item in enumerate(loc.value):
            lines[f"{fld}[{i}]"] = item.line
            values.append(_axis_value(axis, item, lambda m, it=item, i=i: err(m, it, f"{fld}[{i}]")))
        seen: dict[Any, int] = {}
        for i, v in enumerate(values):
            if v in seen:
                raise err(f"duplicate value {_show(v)} (also at index {seen[v]})", loc.value[i], f"{fld}[{i}]")
            seen[v] = i
        axes[axis] = values
    return axes


def _cases(doc: dict[str, Located], broker: BrokerSettings, err, lines: dict[str, int]) -> list[Case]:
    """``cases:``: a list of {name, description, axes, broker}, each name distinct."""
    if "cases" not in doc:
        return []
    loc = doc["cases"]
    if not isinstance(loc.value, list) or not loc.value:
        raise err("must be a non-empty list of cases ({name, description, axes, broker})", loc, "cases")
    out: list[Case] = []
    for k, item in enumerate(loc.value):
        fld = f"cases[{k}]"
        if not isinstance(item.value, dict):
            raise err(f"a case is a mapping (name, description, axes, broker), got {type(item.value).__name__}",
                      item, fld)
        for key, sub in item.value.items():
            if key not in CASE_KEYS:
                raise err(f"unknown key (expected one of {', '.join(sorted(CASE_KEYS))})", sub, f"{fld}.{key}")
        if "name" not in item.value:
            raise err("missing (every case has a name, which ends its permutation ids)", item, f"{fld}.name")
        name = item.value["name"].value
        if not isinstance(name, str) or not CASE_NAME_RE.match(name):
            raise err(f"must be a lowercase letter then up to 31 lowercase letters, digits or '_', got {show(name)}",
                      item.value["name"], f"{fld}.name")
        if any(c.name == name for c in out):
            raise err(f"duplicate case name {show(name)}", item.value["name"], f"{fld}.name")
        description = _str_field(item.value, "description", "", lambda m, lc, f: err(m, lc, f"{fld}.{f}"))
        axes = _axes(item.value["axes"], f"{fld}.axes", err, lines, required=False) if "axes" in item.value else {}
        own = _settings(item.value, "broker", BROKER_FIELDS, lambda m, lc, f: err(m, lc, f"{fld}.{f}"))
        if "broker" in item.value and isinstance(item.value["broker"].value, dict):
            lines.update({f"{fld}.broker.{b}": it.line for b, it in item.value["broker"].value.items()})
        out.append(Case(name=name, description=description, axes=axes, broker=_replace(broker, **own)))
    return out


def _show(v: Any) -> str:
    return v.token if isinstance(v, DialogStrategy) else "unlimited" if v is None else show(v)


def _str_field(doc, key, default, err) -> str:
    if key not in doc:
        return default
    loc = doc[key]
    if not isinstance(loc.value, str):
        raise err(f"must be a string, got {type(loc.value).__name__}", loc, key)
    return loc.value


def _axis_value(axis: str, item: Located, err) -> Any:
    v = item.value
    if axis == "dialogs":
        try:
            return DialogStrategy.parse(unwrap(item))
        except ValueError as e:
            raise err(str(e)) from None
    if axis == "server":
        if not isinstance(v, str):
            raise err(f"a server profile is a name, got {type(v).__name__} {show(v)}")
        if not SERVER_NAME_RE.match(v):
            raise err(f"server profile {show(v)} must be a letter then up to 39 letters, digits or '_'")
        return v
    if axis == "messages_per_dialog":
        if v == "unlimited":
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_MESSAGES_PER_DIALOG:
            raise err(f"must be unlimited or an integer from 1 to {MAX_MESSAGES_PER_DIALOG}, got {show(v)}")
        return v
    if axis == "fire_and_forget":
        if not isinstance(v, bool):
            raise err(f"must be true or false, got {show(v)}")
        return v
    if axis == "rate":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise err(f"must be a number of SENDs per second, got {type(v).__name__} {v!r}")
        if not 0 < v <= MAX_RATE:
            raise err(f"must be above 0 and at most {MAX_RATE:g} SENDs per second per initiator, got {v}")
        return float(v)
    if axis == "priority":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise err(f"must be the share of dialogs at high priority, a number from 0 to 1, got "
                      f"{type(v).__name__} {show(v)}")
        if not 0 <= v <= 1:
            raise err(f"must be a share of dialogs from 0 to 1 (0.5: half at high priority), got {v}")
        return float(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise err(f"must be an integer, got {type(v).__name__} {show(v)}")
    if axis in ("waitfor_timeout_ms", "processing_us_per_message"):
        # 0 is allowed: RECEIVE returns at once when the queue is empty (the task ends); no work
        lo, hi = BROKER_FIELDS[axis][1:]
        what = "WAITFOR timeout in milliseconds" if axis == "waitfor_timeout_ms" else "time in microseconds"
        if not lo <= v <= hi:
            raise err(f"must be a {what} from {lo} to {hi}, got {v}")
        return v
    if v <= 0:
        raise err(f"must be positive, got {v}")
    if axis == "payload_bytes" and v > MAX_PAYLOAD_BYTES:
        raise err(f"payload over 2 GB - 1 ({v} > {MAX_PAYLOAD_BYTES} bytes): Service Broker "
                  "messages are varbinary(max)")
    if axis == "initiators" and v > 64:
        raise err(f"at most 64 initiators, got {v}")
    if axis == "threads" and v > 10_000:
        raise err(f"at most 10000 threads per initiator, got {v}")
    if axis in BROKER_FIELDS:
        _, lo, hi = BROKER_FIELDS[axis]
        if not lo <= v <= hi:
            raise err(f"must be between {lo} and {hi}, got {v}")
    return v


def _settings(doc, section: str, spec: dict, err) -> dict[str, Any]:
    if section not in doc:
        return {}
    loc = doc[section]
    if loc.value is None:
        return {}
    if not isinstance(loc.value, dict):
        raise err("must be a mapping", loc, section)
    out = {}
    for key, item in loc.value.items():
        fld = f"{section}.{key}"
        if key not in spec:
            raise err(f"unknown key (expected one of {', '.join(spec)})", item, fld)
        kind, lo, hi = spec[key]
        v = item.value
        if kind is str:
            if v not in lo:
                raise err(f"must be one of {', '.join(lo)}, got {show(v)}", item, fld)
            out[key] = v
            continue
        if kind is bool:
            if not isinstance(v, bool):
                raise err(f"must be true or false, got {show(v)}", item, fld)
            out[key] = v
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
            raise err(f"must be {'an integer' if kind is int else 'a number'}, got {type(v).__name__} {show(v)}",
                      item, fld)
        if not lo <= v <= hi:
            raise err(f"must be between {lo} and {hi}, got {v}", item, fld)
        out[key] = kind(v)
    return out
