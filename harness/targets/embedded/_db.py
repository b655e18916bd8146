"""Connections to the embedded server, shared by the target, the sender and the broker.

Also the "raw array" adaptation the transport uses: arrays pass from one database to another
in the server's binary form, never parsed into Python objects.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading

import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

from ...errors import TargetError, UserError, first_line
from ...redact import redact_string

#: client_connection_check_interval of the broker's sessions: backends of a killed broker
#: notice (and roll back, releasing their locks) within this time.
CHECK_CLIENT_MS = 500

#: The service queue's name (workloads/embedded/target.sql).
QUEUE = "MySSBLabTestQueue"

#: Database name prefix: letters, digits and underscores, starting with a letter.
PREFIX_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

# array type OIDs the transport moves as opaque binary values
UUID_ARRAY, INT8_ARRAY, INT2_ARRAY, BYTEA_ARRAY = 2951, 1016, 1005, 1001


def database_names(prefix: str, initiators: int) -> tuple[str, list[str]]:
    """(target database, [initiator databases]) for a validated prefix."""
    if not PREFIX_RE.fullmatch(prefix):
        raise UserError(f"invalid database prefix {prefix!r}: use 1-40 lowercase letters, digits or '_', "
                          "starting with a letter")
    return f"{prefix}_target", [f"{prefix}_init{i}" for i in range(1, initiators + 1)]


def connect(conninfo: str, application_name: str, *, autocommit: bool = True,
            check_client_ms: int | None = None, **settings: str) -> psycopg.Connection:
    """An autocommit connection tagged with ``application_name`` (how the wait sampler and
    Tasks Running tell the emulation's sessions apart). ``check_client_ms`` sets
    client_connection_check_interval so a backend whose client died (a killed broker) stops
    within that time even in the middle of a long statement."""
    opts = []
    if check_client_ms:
        opts.append(f"-c client_connection_check_interval={int(check_client_ms)}")
    for k, v in settings.items():
        if not re.fullmatch(r"[a-z_]+(\.[a-z_]+)?", k) or not re.fullmatch(r"[A-Za-z0-9_.]+", str(v)):
            raise ValueError(f"bad session setting {k}={v!r}")
        opts.append(f"-c {k}={v}")
    kwargs = {"options": " ".join(opts)} if opts else {}
    try:
        return psycopg.connect(conninfo, autocommit=autocommit, application_name=application_name,
                               connect_timeout=10, **kwargs)
    except psycopg.OperationalError as e:
        raise TargetError(f"cannot connect to the embedded PostgreSQL ({redact_string(conninfo)}): "
                          f"{str(e).strip()}") from None


def connection_lost(conn, who: str, error: Exception, stop: threading.Event) -> None:
    """A broker thread's database call failed: log it, close the connection quietly and pause
    before the thread reconnects. Returns the new (absent) connection."""
    logging.getLogger("ssbench.broker").warning("%s: %s", who, first_line(error))
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
    stop.wait(0.5)
    return None


class RawArray:
    """An array value in PostgreSQL's binary format, passed through untouched."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self) -> int:  # pragma: no cover - debugging aid
        return len(self.data)


class _RawLoader(Loader):
    format = Format.BINARY

    def load(self, data) -> RawArray:
        return RawArray(bytes(data))


class _RawDumper(Dumper):
    format = Format.BINARY
    oid = 0  # unknown: the query casts the parameter ($1::uuid[])

    def dump(self, obj: RawArray) -> bytes:
        return obj.data


def use_raw_arrays(conn: psycopg.Connection) -> None:
    """Make ``conn`` load uuid[]/int8[]/int2[]/bytea[] results as :class:`RawArray` (binary
    cursors only) and dump RawArray parameters as they are."""
    for oid in (UUID_ARRAY, INT8_ARRAY, INT2_ARRAY, BYTEA_ARRAY):
        conn.adapters.register_loader(oid, _RawLoader)
    conn.adapters.register_dumper(RawArray, _RawDumper)
