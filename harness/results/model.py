"""The results contract: typed documents with a schema version and to/from JSON.

:class:`RunRecord` (``run.json``), :class:`RepetitionSummary` (``rep-NN/summary.json``, one
frozen record per section, from :mod:`.fields`) and :class:`PermutationSummary`. An unsupported
version is refused with one line naming the file; version 1 summaries are upgraded
(:func:`upgrade_v1`); fields a newer minor writer adds are kept in ``extra``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import UserError
from .fields import BY_NAME, FIELDS, SECTIONS, STATUSES, STORED, flat_row, get_path
from .records import Document, load

RUN_SCHEMA = "ssbench.run/1"
SUMMARY_SCHEMA = "ssbench.summary/2"
PERMUTATION_SCHEMA = "ssbench.permutation/1"
LATENCY_SCHEMA = "ssbench.latency/1"
#: the summary versions this ssbench reads (1: one flat object, upgraded on reading)
SUMMARY_VERSIONS = ("1", "2")


def check_schema(doc: Any, expected: str, file: str | None = None, versions: tuple[str, ...] = ()) -> dict[str, Any]:
    """``doc`` must be a JSON object whose ``schema`` has ``expected``'s family and major version
    (or one of ``versions``)."""
    if not isinstance(doc, dict):
        raise UserError(f"not a JSON object (expected {expected})", file=file)
    got = doc.get("schema")
    if got is None:
        raise UserError(f"no 'schema' field (expected {expected})", file=file, field="schema")
    family, _, version = expected.partition("/")
    if not isinstance(got, str) or got.partition("/")[0] != family:
        raise UserError(f"schema is {got!r}, expected {expected}", file=file, field="schema")
    if got.partition("/")[2].split(".")[0] not in (versions or (version,)):
        raise UserError(f"unsupported schema version {got!r} (this ssbench reads {expected})",
                        file=file, field="schema")
    return doc


#: run.json's ``target.capabilities`` (harness.targets.base.Capabilities) as ssbench's targets
#: declared them before run.json recorded it: a run recorded earlier is read by its kind
CAPABILITIES_BEFORE_RECORDED: dict[str, dict[str, Any]] = {
    "embedded": {"priority": False, "backlog": True, "dialog_lifetime": True, "profile_aliases": True,
                 "emulation": "PostgreSQL"},
    "mssql": {"priority": True, "backlog": True, "dialog_lifetime": True, "profile_aliases": False,
              "emulation": None},
}


def target_capabilities(target: dict[str, Any] | None) -> dict[str, Any]:
    """What a run's target declared it can do: run.json's ``target.capabilities``, or for a run
    recorded before run.json carried it, what the target of its recorded kind declared then
    (empty when unknown)."""
    target = target if isinstance(target, dict) else {}
    caps = target.get("capabilities")
    if isinstance(caps, dict):
        return caps
    return dict(CAPABILITIES_BEFORE_RECORDED.get(target.get("kind"), {}))


class Stamped(Document):
    """A document that is a file of its own: its ``schema`` written first and checked on reading."""

    SCHEMA: ClassVar[str]
    #: the major versions read (default: ``SCHEMA``'s own)
    VERSIONS: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.SCHEMA, **super().to_json()}

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = ""):
        check_schema(data, cls.SCHEMA, file, cls.VERSIONS)
        return super().from_json({k: v for k, v in data.items() if k != "schema"}, file, where)


# --------------------------------------------------------------------------- repetition summary

def _section_class(section: str) -> type:
    """A frozen record of a section's fields (None where absent), from the registry."""
    specs = [(f.name, f.type | None, field(default=None, metadata={"required": f.required, "minimum": f.minimum}))
             for f in STORED[section]]
    return dataclasses.make_dataclass(f"{section.title()}SummarySection", specs, bases=(SummarySection,), frozen=True)


class SummarySection(Document):
    """One section of a repetition summary (``window``, ``accounting``, ``load``, ...)."""


SECTION_TYPES: dict[str, type] = {s: _section_class(s) for s in SECTIONS if s}


class _Summary(Stamped):
    """What every repetition summary does: a value by its field name, the flat row, a copy
    with fields replaced, JSON of this version (and of version 1, upgraded)."""

    SCHEMA: ClassVar[str] = SUMMARY_SCHEMA
    VERSIONS: ClassVar[tuple[str, ...]] = SUMMARY_VERSIONS

    def __getitem__(self, name: str) -> Any:
        f = BY_NAME[name]
        return get_path(getattr(self, f.section) if f.section else self, f.path or (f.name,))

    def __getattr__(self, name: str) -> Any:
        """A field of a section by its registry name (``s.send_rate`` is ``s.load.send_rate``)."""
        f = BY_NAME.get(name)
        if f is None or not f.section:
            raise AttributeError(name)
        return self[name]

    def get(self, name: str, default: Any = None) -> Any:
        v = self[name] if name in BY_NAME else None
        return default if v is None else v

    def row(self) -> dict[str, Any]:
        """The flat row (harness.results.fields.flat_row) of this summary."""
        return flat_row(self.to_json())

    @classmethod
    def of(cls, **values: Any) -> "RepetitionSummary":
        """A summary from its fields, each by its registry name (a name not declared in
        harness/results/fields.py is a ValueError: declare it there first)."""
        top: dict[str, Any] = {}
        by_section: dict[str, dict[str, Any]] = {}
        for name, v in values.items():
            f = BY_NAME.get(name)
            if f is None or f.path:
                raise ValueError(f"summary field {name!r} is not declared in harness/results/fields.py")
            (by_section.setdefault(f.section, {}) if f.section else top)[name] = (
                None if v is None else load(f.type, v, None, name))
        return cls(**top, **{s: t(**by_section.get(s, {})) for s, t in SECTION_TYPES.items()})

    def replace(self, **values: Any) -> "RepetitionSummary":
        """A copy with fields replaced, each by its registry name."""
        top, by_section = {}, {}
        for name, v in values.items():
            f = BY_NAME[name]
            (by_section.setdefault(f.section, {}) if f.section else top)[name] = v
        for section, vals in by_section.items():
            top[section] = dataclasses.replace(getattr(self, section), **vals)
        return dataclasses.replace(self, **top)

    def to_json(self) -> dict[str, Any]:
        doc = super().to_json()
        for s in SECTION_TYPES:
            if not doc.get(s):
                doc.pop(s, None)
        return doc

    @classmethod
    def from_json(cls, data: Any, file: str | None = None, where: str = "") -> "RepetitionSummary":
        check_schema(data, cls.SCHEMA, file, cls.VERSIONS)
        v1 = str(data["schema"]).partition("/")[2].split(".")[0] == "1"
        body = dict(upgrade_v1(data) if v1 else data)
        for s in SECTION_TYPES:    # a section with nothing in it is not written
            body.setdefault(s, {})
        try:
            s = super().from_json(body, file, where)
        except UserError as e:     # a version-1 document's field is named where it has it
            if not (v1 and e.field and e.field.split(".")[0] in SECTION_TYPES and not e.field.startswith("window.")):
                raise
            raise UserError(e.detail, file=file, field=e.field.partition(".")[2]) from None
        if s.status not in STATUSES:
            raise UserError(f"unknown status {s.status!r} (expected one of {', '.join(STATUSES)})",
                            file=file, field="status")
        return s


def _summary_class() -> type:
    specs = [(f.name, f.type if f.required else f.type | None,
              field(metadata={"minimum": f.minimum}) if f.required else
              field(default=None, metadata={"minimum": f.minimum})) for f in STORED[""]]
    specs.sort(key=lambda spec: spec[2].default is None)   # required first
    specs += [(s, t, field(default_factory=t)) for s, t in SECTION_TYPES.items()]
    specs.append(("extra", dict[str, Any], field(default_factory=dict, repr=False, compare=False)))
    return dataclasses.make_dataclass("RepetitionSummary", specs, bases=(_Summary,), frozen=True,
                                      namespace={"__doc__": "One repetition of one permutation (rep-NN/summary.json)."})


RepetitionSummary = _summary_class()


def upgrade_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """A version-1 summary (one flat object, ``window`` nested) in this version's sections, with
    what version 1 left to its readers: the window's span, total_threads, the behind flag."""
    out: dict[str, Any] = {"schema": SUMMARY_SCHEMA}
    known = {"schema"}
    for f in FIELDS:
        if f.path:
            continue
        if not f.section:
            src, key = doc, f.name
        else:
            src, key = (doc.get("window") or {}, f.name) if f.section == "window" else (doc, f.name)
        known.add("window" if f.section == "window" else f.name)
        if isinstance(src, dict) and src.get(key) is not None:
            (out.setdefault(f.section, {}) if f.section else out)[f.name] = src[key]
    w = out.setdefault("window", {})
    if w.get("span_seconds") is None:
        span = (w.get("measure_end") or 0.0) - (w.get("measure_start") or 0.0)
        w["span_seconds"] = span if span > 0 else w.get("measure_seconds")
    perm = dict(out.get("permutation") or {})
    if perm.get("total_threads") is None and perm.get("initiators") and perm.get("threads"):
        perm["total_threads"] = perm["initiators"] * perm["threads"]
    out["permutation"] = perm
    if doc.get("status") == "behind":   # version 1 had the status before the flag
        out.setdefault("load", {})["behind"] = True
    out.update({k: v for k, v in doc.items() if k not in known})
    return out


# --------------------------------------------------------------------------- permutation summary

@dataclass
class PermutationSummary(Stamped):
    """One permutation across its repetitions (``<perm>/summary.json``)."""

    SCHEMA: ClassVar[str] = PERMUTATION_SCHEMA

    permutation: dict[str, Any]
    repetitions: list[int]
    #: medians across the repetitions of the fields the registry marks (harness.results.fields)
    median: dict[str, float]
    messages_lost: int = 0
    errors: int = 0
    #: open loop: repetitions whose achieved rate fell short of the offered one (their behind
    #: flag, whatever status a disturbance gave them)
    behind: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


# --------------------------------------------------------------------------- run.json

@dataclass
class RunRecord(Stamped):
    """A run's provenance and status (``run.json``); rewritten as the run progresses."""

    SCHEMA: ClassVar[str] = RUN_SCHEMA

    status: str
    run_id: str = ""             # the directory's name
    started: str | None = None
    ended: str | None = None
    ssbench: dict[str, Any] = field(default_factory=dict)
    matrix: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    permutations_done: int = 0
    permutations_total: int = 0
    messages_lost: int | None = None
    resumed: str | None = None
    error: str | None = None
    web: dict[str, Any] | None = None
    #: ``run.repetitions: auto``: rounds run, time spent, why the rounds stopped, the
    #: comparisons left undecided (harness.runner.Runner.run_auto)
    auto: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
