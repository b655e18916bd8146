"""Test matrices: a YAML file of axes and run settings, validated and expanded to permutations.

A matrix names axes (lists of values); the permutations are their cartesian product (one per
``blocks:`` entry, of ``axes`` and its own) in a fixed order (initiators outermost, then threads,
dialog strategy, payload, server, optional axes), each with a stable, readable id such as
``i3-t50-trick150-p8192-sql2008``; with ``cases:``, each case's products in turn (its axes
replacing the matrix's, its broker settings), its name ending the ids. The ``run:`` settings
live in :mod:`harness.runsettings`. See ``docs/matrices.md`` for the format.

Every user error names the file, the line and the field, and is raised as
:class:`harness.errors.UserError` (exit code 2, no traceback).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass, field, replace as _replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from .results.fields import AXES
from .brokersettings import BROKER_FIELDS, BrokerSettings, broker_values
from . import plan
from .dialogstrategy import DialogStrategy
from .errors import UserError, show
from .runsettings import RUN_FIELDS, RunSettings, run_settings, settings as _settings
from .yamlsrc import Located, Reader, load_located, unwrap

DEFAULT_RUN = RunSettings()

MAX_PAYLOAD_BYTES = 2 ** 31 - 1  # SQL Server's varbinary(max) limit: 2 GB - 1
MAX_INITIATORS = 64             # the initiators axis' and both targets' limit
SERVER_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,39}$")


# --------------------------------------------------------------------------- settings
# (dialog strategies: harness.dialogstrategy, broker settings: harness.brokersettings and run settings:
# harness.runsettings, re-exported here)

# Axes (declared in harness.results.fields.AXES): required ones first, in expansion order;
# optional broker axes override BrokerSettings.
REQUIRED_AXES = tuple(a.matrix_name for a in AXES if a.matrix == "required")
OPTIONAL_AXES = tuple(a.matrix_name for a in AXES if a.matrix == "optional" and a.broker)
#: optional axes named differently from the BrokerSettings field they set
AXIS_FIELDS = {a.alias: a.name for a in AXES if a.alias}
#: features only some targets implement (each target declares its own,
#: harness.targets.base.Capabilities), and what messages say a target lacking one cannot do
#: (Matrix.feature_uses: the matrix fields that use each)
TARGET_FEATURES = {"priority": "emulate priority", "backlog": "turn activation off for a backlog drain",
                   "dialog_lifetime": "retire dialogs after messages_per_dialog",
                   "transport_rate_limit": "emulate a transport rate limit",
                   "client_cpu_per_send": "emulate a client CPU cost per SEND",
                   "alternate": "alternate dialog strategies inside one window"}
#: the broker settings that use a feature when not 0 (Matrix.feature_uses)
FEATURE_SETTINGS = {"priority": "high_priority_share", "transport_rate_limit": "transport_rate_limit",
                    "client_cpu_per_send": "client_cpu_us_per_send"}

#: optional load axes: ``rate`` is the offered SENDs per second per initiator (open loop,
#: docs/matrices.md); absent, every user sends as fast as its SEND returns (closed loop)
LOAD_AXES = tuple(a.name for a in AXES if a.matrix == "optional" and a.role == "load")
MAX_RATE = 1_000_000.0
#: optional dialog-lifetime axes (docs/matrices.md, "Conversation lifetime"):
#: ``messages_per_dialog`` (1, N or ``unlimited``: messages a dialog carries before the sender
#: retires it and begins a new one) and ``fire_and_forget`` (true: the initiator ENDs a retired
#: dialog right after its last SEND instead of waiting for the target's EndDialog). Absent, a
#: dialog is reused for the whole run (``unlimited``) and ids are unchanged.
DIALOG_AXES = tuple(a.name for a in AXES if a.matrix == "optional" and a.role == "technique" and not a.broker)
MAX_MESSAGES_PER_DIALOG = 1_000_000_000
# (the activation helper's waitfor_timeout_ms / priority axes go beside OPTIONAL_AXES)
AXIS_TOKENS = {a.matrix_name: a.token for a in AXES if a.token}
ALL_AXES = REQUIRED_AXES + OPTIONAL_AXES + LOAD_AXES + DIALOG_AXES
TOP_KEYS = {"name", "description", "axes", "blocks", "run", "broker", "embedded_profiles", "cases"}
#: the axes a block may give (``blocks:``, docs/matrices.md): the matrix is the union of one
#: product per block, of ``axes`` and the block's own axes
BLOCK_AXES = OPTIONAL_AXES + LOAD_AXES + DIALOG_AXES
#: a case (``cases:``, docs/matrices.md): permutations built on purpose, each the matrix's axes
#: with some replaced, its broker settings overridden and, in ``run:``, its own windows; its
#: name ends the permutation ids
CASE_KEYS = {"name", "description", "axes", "broker", "run"}
#: the ``run:`` settings a case may give its own: its windows (a 1-thread permutation may need
#: a longer one than a 32-thread one for the same precision) and its drain's bound (a case that
#: builds a backlog on purpose need not wait for it)
CASE_RUN_FIELDS = {k: RUN_FIELDS[k] for k in ("warmup_seconds", "measure_seconds", "drain_timeout_seconds")}
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
    #: its own windows and drain bound (:data:`CASE_RUN_FIELDS`), over the matrix's ``run:``
    run: dict[str, float] = field(default_factory=dict)

    def run_settings(self, matrix_run: RunSettings) -> RunSettings:
        """The matrix's run settings with this case's own."""
        return _replace(matrix_run, **self.run) if self.run else matrix_run


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
    #: the line of each value (``axes.server[1]``, ``embedded_profiles.x``), for later messages
    lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    #: ``blocks:``: each block's own axes (:data:`BLOCK_AXES`); empty: one product of ``axes``
    blocks: list[dict[str, list[Any]]] = field(default_factory=list)
    #: ``cases:`` (docs/matrices.md): when given, the permutations are each case's, in order
    cases: list[Case] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(1 for _ in self.permutations())

    def groups(self) -> list[tuple[str | None, str, dict[str, list[Any]], BrokerSettings]]:
        """(case name, field prefix, axes, broker settings) of each product: ``axes`` alone or with
        each block's (``blocks[K]``), for the matrix itself or for each of its cases (``cases[K].``:
        its axes replacing the matrix's, its broker settings)."""
        cases = [(c.name, f"cases[{k}].", c.axes, c.broker) for k, c in enumerate(self.cases)] \
            or [(None, "", {}, self.broker)]
        return [(name, prefix, {**self.axes, **own, **block}, broker)
                for name, prefix, own, broker in cases for block in self.blocks or [{}]]

    def run_for(self, perm: Permutation) -> RunSettings:
        """The run settings of ``perm``: the matrix's, with its case's windows."""
        case = next((c for c in self.cases if c.name == perm.case), None)
        return case.run_settings(self.run) if case is not None else self.run

    def axis_items(self, axis: str) -> Iterator[tuple[str, Any]]:
        """(field, value) of every value an axis takes in some permutation (``axes.server[0]``,
        ``blocks[0].rate[1]``, ``cases[1].axes.server[0]``), in file order."""
        sources = ([("axes", self.axes)] if not self.cases or any(axis not in c.axes for c in self.cases) else []) \
            + [(f"blocks[{k}]", b) for k, b in enumerate(self.blocks)] \
            + [(f"cases[{k}].axes", c.axes) for k, c in enumerate(self.cases)]
        for where, axes in sources:
            for i, v in enumerate(axes.get(axis, [])):
                yield f"{where}.{axis}[{i}]", v

    def permutations(self) -> Iterator[Permutation]:
        index = 0
        for case, _, axes, base in self.groups():
            names = list(REQUIRED_AXES) + [a for a in BLOCK_AXES if a in axes]
            for combo in itertools.product(*(axes[a] for a in names)):
                values = dict(zip(names, combo))   # fire and forget x unlimited: its false twin again
                if values.get("fire_and_forget") and values.get("messages_per_dialog") is None:
                    continue
                index += 1
                yield _permutation(index, values, base, case)

    def schedule(self) -> list[tuple[Permutation, int]]:
        """Every (permutation, repetition) in the order the run executes them (``run.order``)."""
        perms = list(self.permutations())
        reps = range(1, self.run.planned_repetitions + 1)
        if self.run.order == "sequential":
            return [(p, r) for p in perms for r in reps]
        return [(p, r) for r in reps for p in perms]

    def profile_aliases(self, *, applies: bool) -> dict[str, str]:
        """Server names mapped to a target's own profiles: the matrix's ``embedded_profiles``,
        for a target that reads that section (``applies``: its ``profile_aliases`` capability)."""
        return dict(self.embedded_profiles) if applies else {}

    def feature_uses(self) -> dict[str, list[str]]:
        """The fields that use each of :data:`TARGET_FEATURES`, in file order (``axes``, each of
        ``blocks``, each of ``cases``)."""
        def used(axis: str, keep) -> list[str]:
            return [fld for fld, v in self.axis_items(axis) if keep(v)]

        def setting(name: str) -> list[str]:   # the matrix's broker, or each case's (its own line)
            groups = [(f"cases[{k}].", c.broker) for k, c in enumerate(self.cases)] or [("", self.broker)]
            return list(dict.fromkeys(f"{p}broker.{name}" if f"{p}broker.{name}" in self.lines else f"broker.{name}"
                                      for p, broker in groups if getattr(broker, name)))

        uses = {feature: setting(name) for feature, name in FEATURE_SETTINGS.items()}
        return {"priority": used("priority", bool) + uses.pop("priority"),
                "backlog": ["run.backlog_messages"] if self.run.backlog_messages else [],
                "dialog_lifetime": used("messages_per_dialog", lambda v: v is not None),
                "alternate": ["run.alternate"] if self.run.alternate else [], **uses}

    def check_servers(self, target: str, profiles: Iterable[str], *, supports: Iterable[str] = (),
                      aliases: bool = False) -> None:
        """Every value of ``axes.server`` (and of each case's) names one of the target's server profiles (through
        ``embedded_profiles`` when ``aliases``: the target reads that section), and the matrix uses
        no feature the target does not ``supports`` (:data:`TARGET_FEATURES`); UserError at the
        offending value's line if not. Needs no connection: the commands call it (through
        harness.targets.base.TargetConfig.check_matrix) before anything is created."""
        supports = set(supports)
        for feature, fields in self.feature_uses().items():
            if fields and feature not in supports:
                fld = fields[0]
                raise UserError(f"the {target} target does not {TARGET_FEATURES[feature]} (docs/matrices.md)"
                                + (": drop the axis or use 0" if feature == "priority" and not fld.startswith("broker")
                                   else ""),
                                file=str(self.path), line=self.lines.get(fld), field=fld)
        known = list(profiles)
        mapped = self.profile_aliases(applies=aliases)
        for fld, server in self.axis_items("server"):
            profile = mapped.get(server, server)
            if profile in known:
                continue
            via = f" (embedded_profiles maps it to {show(profile)})" if profile != server else ""
            raise UserError(f"server profile {show(server)}{via} is not defined for the {target} "
                            f"target (it has: {', '.join(known) or 'none'})",
                            file=str(self.path), line=self.lines.get(fld), field=fld)

    def set_workers_per_initiator(self, n: int, flag: str = "--workers-per-initiator") -> None:
        """Override ``run.workers_per_initiator`` (a command-line flag). Threads split over the
        processes as evenly as possible; an initiator never has more processes than threads
        (harness.load.placement)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= RUN_FIELDS["workers_per_initiator"][2]:
            raise UserError(f"must be an integer between 1 and {RUN_FIELDS['workers_per_initiator'][2]}, got {n!r}",
                            field=flag)
        self.run = _replace(self.run, workers_per_initiator=n)

    def set_send_mode(self, mode: str, flag: str = "$SSBENCH_SEND_MODE") -> None:
        """Override ``run.send_mode`` (the environment's ``SSBENCH_SEND_MODE``)."""
        if mode not in RUN_FIELDS["send_mode"][1]:
            raise UserError(f"expected one of {', '.join(RUN_FIELDS['send_mode'][1])}, got {show(mode)}", field=flag)
        self.run = _replace(self.run, send_mode=mode)

    def document(self) -> dict[str, Any]:
        """The matrix as the YAML document :func:`load_matrix` reads back to an equal matrix
        (run settings at their defaults left out)."""
        def plain(axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
            return {k: [v.token if isinstance(v, DialogStrategy) else
                        ("unlimited" if k == "messages_per_dialog" and v is None else v) for v in vs]
                    for k, vs in axes.items()}
        run = {k: v for k, v in asdict(self.run).items() if v != getattr(DEFAULT_RUN, k)}
        return {"name": self.name, **({"description": self.description} if self.description else {}),
                "axes": plain(self.axes), **({"blocks": [plain(b) for b in self.blocks]} if self.blocks else {}),
                **({"run": run} if run else {}), "broker": broker_values(self.broker),
                **({"embedded_profiles": dict(self.embedded_profiles)} if self.embedded_profiles else {}),
                **({"cases": [{"name": c.name, "description": c.description, "axes": plain(c.axes),
                               "broker": broker_values(c.broker), **({"run": dict(c.run)} if c.run else {})}
                              for c in self.cases]} if self.cases else {})}

    def to_dict(self) -> dict[str, Any]:
        """What run.json records: the document, every run setting, the file and its hash."""
        return {**self.document(), "description": self.description, "file": str(self.path), "sha256": self.sha256,
                "run": asdict(self.run), "embedded_profiles": dict(self.embedded_profiles),
                "permutations": len(self)}


def _permutation(index: int, values: dict[str, Any], broker: BrokerSettings, case: str | None) -> Permutation:
    suffix = ""
    for axis in OPTIONAL_AXES:
        if axis in values:
            broker = _replace(broker, **{AXIS_FIELDS.get(axis, axis): values[axis]})
            v = values[axis]
            suffix += f"-{AXIS_TOKENS[axis]}{v:g}" if isinstance(v, float) else f"-{AXIS_TOKENS[axis]}{v}"
    return Permutation(index=index, initiators=values["initiators"], threads=values["threads"],
                       dialogs=values["dialogs"], payload_bytes=values["payload_bytes"], server=values["server"],
                       broker=broker, _broker_suffix=suffix, rate=values.get("rate"),
                       messages_per_dialog=values.get("messages_per_dialog"),
                       fire_and_forget=bool(values.get("fire_and_forget", False)),
                       _dialog_suffix=f"-mpd{values['messages_per_dialog'] or 'unlimited'}"
                       if "messages_per_dialog" in values else "", case=case)


# --------------------------------------------------------------------------- loading

def load_matrix(path: str | Path, embedded_profiles: Iterable[str] | None = None) -> Matrix:
    """Load, validate and return a matrix; raises UserError naming file, line and field.

    ``embedded_profiles`` are the embedded target's profile names, against which the matrix's
    ``embedded_profiles`` mapping is checked (the commands pass them; this module knows no
    target)."""
    p = Path(path)
    top, sha256 = load_located(p, "matrix")
    doc: dict[str, Located] = top.value
    err = Reader(str(path), top.line).err    # file, line and field of a refusal (an echoed secret redacted)

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
    axes_loc = doc["axes"]
    if not isinstance(axes_loc.value, dict):
        raise err("must be a mapping of axis name to a list of values", axes_loc, "axes")
    lines: dict[str, int] = {}
    axes = _axes(axes_loc, "axes", ALL_AXES, REQUIRED_AXES, err, lines)
    blocks = _blocks(doc.get("blocks"), axes, err, lines)

    run = run_settings(doc, err)
    broker = BrokerSettings(**_settings(doc, "broker", BROKER_FIELDS, err))
    for section in ("run", "broker"):
        if section in doc and isinstance(doc[section].value, dict):
            lines.update({f"{section}.{k}": item.line for k, item in doc[section].value.items()})

    profiles: dict[str, str] = {}
    m = Matrix(path=p, name=name, description=description, axes=axes, run=run, broker=broker,
               embedded_profiles=profiles, sha256=sha256, lines=lines, blocks=blocks,
               cases=_cases(doc.get("cases"), broker, blocks, err, lines))
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
            profiles[key] = loc.value
            lines[f"embedded_profiles.{key}"] = loc.line
    _check_blocks_distinct(m, doc.get("blocks"), err)
    plan.check(m.run, list(m.permutations()), m.lines, path)
    return m


def _axes(loc: Located, where: str, allowed: tuple[str, ...], required: tuple[str, ...], err,
          lines: dict[str, int]) -> dict[str, list[Any]]:
    """The axes of a mapping (``axes`` or a block): each a non-empty list of valid, distinct
    values; the line of each value recorded in ``lines``."""
    axes: dict[str, list[Any]] = {}
    for key, item in loc.value.items():
        if key not in allowed:
            raise err(f"unknown axis (expected {', '.join(allowed)})", item, f"{where}.{key}")
    for axis in allowed:
        fld = f"{where}.{axis}"
        if axis not in loc.value:
            if axis in required:
                raise err("missing axis", loc, fld)
            continue
        aloc = loc.value[axis]
        if not isinstance(aloc.value, list):
            raise err("must be a list of values", aloc, fld)
        if not aloc.value:
            raise err("empty axis: give at least one value", aloc, fld)
        values = []
        for i, item in enumerate(aloc.value):
            lines[f"{fld}[{i}]"] = item.line
            values.append(_axis_value(axis, item, lambda m, it=item, i=i: err(m, it, f"{fld}[{i}]")))
        seen: dict[Any, int] = {}
        for i, v in enumerate(values):
            if v in seen:
                raise err(f"duplicate value {_show(v)} (also at index {seen[v]})", aloc.value[i], f"{fld}[{i}]")
            seen[v] = i
        axes[axis] = values
    return axes


def _blocks(loc: Located | None, axes: dict[str, list[Any]], err, lines: dict[str, int]) -> list[dict]:
    """``blocks:``: a non-empty list of mappings of :data:`BLOCK_AXES`, none of them also in
    ``axes`` (a block adds its axes to the common ones; it does not replace them)."""
    if loc is None:
        return []
    if not isinstance(loc.value, list) or not loc.value:
        raise err("must be a list of blocks, each a mapping of axes (docs/matrices.md, \"Blocks\")", loc, "blocks")
    blocks = []
    for k, bloc in enumerate(loc.value):
        where = f"blocks[{k}]"
        if not isinstance(bloc.value, dict) or not bloc.value:
            raise err(f"must be a mapping of axes ({', '.join(BLOCK_AXES)})", bloc, where)
        for key, item in bloc.value.items():
            if key in axes:
                raise err("already an axis of every block (axes): give it in axes or in the blocks, not both",
                          item, f"{where}.{key}")
        blocks.append(_axes(bloc, where, BLOCK_AXES, (), err, lines))
    return blocks


def _cases(loc: Located | None, broker: BrokerSettings, blocks: list[dict], err, lines: dict[str, int]) -> list[Case]:
    """``cases:``: a non-empty list of {name, description, axes, broker, run}, each name distinct; a
    case replaces axes of ``axes``, not of the blocks (a block's axes apply to every case)."""
    if loc is None:
        return []
    if not isinstance(loc.value, list) or not loc.value:
        raise err("must be a non-empty list of cases ({name, description, axes, broker, run})", loc, "cases")
    out: list[Case] = []
    for k, item in enumerate(loc.value):
        fld = f"cases[{k}]"
        if not isinstance(item.value, dict):
            raise err(f"a case is a mapping (name, description, axes, broker, run), got {type(item.value).__name__}",
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
        axes: dict[str, list[Any]] = {}
        if "axes" in item.value:
            aloc = item.value["axes"]
            if not isinstance(aloc.value, dict):
                raise err("must be a mapping of axis name to a list of values", aloc, f"{fld}.axes")
            for key, sub in aloc.value.items():
                if any(key in b for b in blocks):
                    raise err("an axis of the blocks, whose axes apply to every case: give it in the blocks or in "
                              "the cases, not both", sub, f"{fld}.axes.{key}")
            axes = _axes(aloc, f"{fld}.axes", ALL_AXES, (), err, lines)
        own = _settings(item.value, "broker", BROKER_FIELDS, lambda m, lc, f: err(m, lc, f"{fld}.{f}"))
        run = _settings(item.value, "run", CASE_RUN_FIELDS, lambda m, lc, f: err(m, lc, f"{fld}.{f}"))
        for section in ("broker", "run"):
            if section in item.value and isinstance(item.value[section].value, dict):
                lines.update({f"{fld}.{section}.{b}": it.line for b, it in item.value[section].value.items()})
        out.append(Case(name=name, description=description, axes=axes, broker=_replace(broker, **own),
                        run={k: float(v) for k, v in run.items()}))
    return out


def _check_blocks_distinct(m: Matrix, loc: Located | None, err) -> None:
    """No permutation of a block repeats one of an earlier block (the same values, the same id;
    with cases, in the same case)."""
    seen: dict[str, int] = {}
    for k, block in enumerate(m.blocks):
        for perm in _replace(m, blocks=[block]).permutations():
            if seen.setdefault(perm.id, k) != k:
                raise err(f"permutation {perm.id} is also in blocks[{seen[perm.id]}]: a block must add "
                          "permutations of its own", loc.value[k], f"blocks[{k}]")


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
    if axis == "initiators" and v > MAX_INITIATORS:
        raise err(f"at most {MAX_INITIATORS} initiators, got {v}")
    if axis == "threads" and v > 10_000:
        raise err(f"at most 10000 threads per initiator, got {v}")
    if axis in BROKER_FIELDS:
        _, lo, hi = BROKER_FIELDS[axis]
        if not lo <= v <= hi:
            raise err(f"must be between {lo} and {hi}, got {v}")
    return v
