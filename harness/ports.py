"""Ports for listeners that start a moment after their port is chosen."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: where the kernel picks outgoing connections' local ports when it cannot say (Linux's default)
EPHEMERAL_DEFAULT = (32768, 60999)


def ephemeral_ports(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in Path(path).read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return EPHEMERAL_DEFAULT


def free_port(rng: random.Random | None = None) -> int:
    """A TCP port on 127.0.0.1 that nobody listens on, for a listener started a moment later
    (the Locust master, a web UI, the embedded PostgreSQL server). Taken below the ephemeral
    range: a port of that range, free when checked, can become the local port of any outgoing
    connection (a database session, an HTTP call) before the listener binds it, and the
    listener then fails with "Address already in use" (seen in CI). Only another listener
    choosing at random at the same moment can take one of these. Falls back to a port the
    kernel picks."""
    lo, _ = ephemeral_ports()
    band = range(max(1024, lo - 20000), lo)
    rng = rng or random.SystemRandom()
    for port in rng.sample(band, min(len(band), 64)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
