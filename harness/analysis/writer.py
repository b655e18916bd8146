"""The one writer of the analysis' tables (Parquet and CSV, from plain rows).

Columns are the rows' keys in first-seen order. Lists of scalars stay lists in Parquet;
mappings are JSON text. In CSV a null is empty, a boolean ``true``/``false``, a nested value JSON.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..results import write_atomic


def _nested(v: Any) -> bool:
    return isinstance(v, dict) or (isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v))


def _column(values: list[Any]) -> pa.Array:
    if any(_nested(v) for v in values):
        values = [None if v is None else json.dumps(v) for v in values]
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):      # mixed types: their text
        return pa.array([None if v is None else (v if isinstance(v, str) else json.dumps(v)) for v in values])


def write_table(tdir: Path, name: str, rows: list[dict[str, Any]], columns: list[str] | None = None) -> list[str]:
    """``tables/<name>.parquet`` and ``tables/<name>.csv`` of ``columns`` (default: the rows' keys
    in first-seen order), each written atomically; the relative paths written."""
    cols = columns or list(dict.fromkeys(k for r in rows for k in r))
    files = write_arrow(tdir, name, pa.table({c: _column([r.get(c) for r in rows]) for c in cols}))
    write_csv(tdir / f"{name}.csv", cols, rows)
    return files + [f"tables/{name}.csv"]


def write_arrow(tdir: Path, name: str, table: pa.Table) -> list[str]:
    """``tables/<name>.parquet`` of an Arrow table (Spark's samples' reduction, or
    :func:`write_table`'s rows), written atomically; the relative paths written."""
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    write_atomic(tdir / f"{name}.parquet", buf.getvalue().to_pybytes())
    return [f"tables/{name}.parquet"]


def write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    out = io.StringIO(newline="")
    w = csv.writer(out)
    w.writerow(columns)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in columns])
    write_atomic(path, out.getvalue())


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return v
