"""The Spark schemas of harness.analysis.schemas agree with the results model
(harness.results.model): every field of a summary is read by the analysis, with a nested
struct where the model nests a document. Fast: no Spark session, only pyspark's type classes."""

from __future__ import annotations

import dataclasses
import typing

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType  # noqa: E402

from harness.analysis import schemas  # noqa: E402
from harness.results import RepetitionSummary  # noqa: E402
from harness.results.model import Document  # noqa: E402

#: model fields read as raw JSON text (free-form items)
RAW_JSON = {"error_samples", "collector_errors", "web"}


def _fields(cls) -> dict[str, typing.Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "extra"}


def _document(tp) -> type | None:
    """The Document class of ``tp``, ``list[tp]`` or ``tp | None``, else None."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (list, typing.Union) or type(tp).__name__ == "UnionType":
        return _document(args[0]) if len(args) == 1 else None
    return tp if isinstance(tp, type) and issubclass(tp, Document) else None


def _compare(cls, struct: StructType, where: str, problems: list[str]) -> None:
    model = _fields(cls)
    spark = {f.name: f.dataType for f in struct.fields}
    extra_spark = set(spark) - set(model) - ({"schema"} if hasattr(cls, "SCHEMA") else set())
    problems += [f"{where}{n}: in the Spark schema, not in the model" for n in sorted(extra_spark)]
    for name, tp in model.items():
        if name not in spark:
            problems.append(f"{where}{name}: in the model, not in the Spark schema")
            continue
        st = spark[name]
        doc = _document(tp)
        if name in RAW_JSON:
            if not isinstance(st, StringType):
                problems.append(f"{where}{name}: expected raw JSON text (StringType)")
        elif doc is not None:
            is_list = typing.get_origin(tp) is list
            inner = st.elementType if is_list and isinstance(st, ArrayType) else st
            if not isinstance(inner, StructType):
                problems.append(f"{where}{name}: the model nests {doc.__name__}, Spark has {st.simpleString()}")
            else:
                _compare(doc, inner, f"{where}{name}.", problems)
        elif typing.get_origin(tp) is list and not isinstance(st, ArrayType):
            problems.append(f"{where}{name}: a list in the model, {st.simpleString()} in Spark")
        elif typing.get_origin(tp) is dict and not isinstance(st, (MapType, StructType)):
            problems.append(f"{where}{name}: an object in the model, {st.simpleString()} in Spark")


def test_summary_schema_matches_the_model():
    problems: list[str] = []
    _compare(RepetitionSummary, schemas.SUMMARY, "", problems)
    assert not problems, "\n".join(problems)


def test_the_comparison_fails_on_a_missing_field():
    problems: list[str] = []
    trimmed = StructType([f for f in schemas.SUMMARY.fields if f.name != "users_active"])
    _compare(RepetitionSummary, trimmed, "", problems)
    assert problems == ["users_active: in the model, not in the Spark schema"]
    window = next(f for f in schemas.SUMMARY.fields if f.name == "window")
    short = StructField("window", StructType([g for g in window.dataType.fields if g.name != "spawn_complete"]))
    nested = StructType([short if f.name == "window" else f for f in schemas.SUMMARY.fields])
    problems = []
    _compare(RepetitionSummary, nested, "", problems)
    assert problems == ["window.spawn_complete: in the model, not in the Spark schema"]


def test_summary_schema_field_order_follows_the_model():
    names = [f.name for f in schemas.SUMMARY.fields]
    assert names == ["schema"] + RepetitionSummary.field_names()
