"""Idle CPUs kept awake while a run measures (``run.keep_cpus_awake``, docs/embedded.md,
"Idle CPUs").

On a virtual machine an idle vCPU halts, and the hypervisor wakes it when work arrives for it:
a client thread's SEND answered by the server, the server's commit answered by the disk. How
long that wake-up takes depends on the host's load at that moment, so a one-thread ping-pong's
rate follows the host, window by window. Linux's PM QoS interface holds the CPUs' wake-up
latency at 0 µs for as long as a process keeps ``/dev/cpu_dma_latency`` open with 0 written to
it: the cpuidle governor then polls instead of halting (what tuned's latency-performance
profile does for a whole machine). Closing the file ends the request, so a killed run leaves
nothing behind.

Polling idle CPUs burn their time on the host: the request lasts for the run only, and only
where the matrix asks. It needs write access to the file (root); elsewhere the run goes on,
says why once, and records it.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Linux PM QoS: the CPUs' wake-up latency a process asks for, in microseconds, while it keeps
#: the file open
PM_QOS_CPU = Path("/dev/cpu_dma_latency")
CPUIDLE = Path("/sys/devices/system/cpu/cpuidle")


def idle_states(cpuidle: Path = CPUIDLE) -> dict[str, Any]:
    """What an idle CPU of this host does: the cpuidle driver and governor, and the guest's
    halt-polling window where the haltpoll driver runs (run.json's ``host.cpu_idle``)."""
    out: dict[str, Any] = {}
    for key, name in (("driver", "current_driver"), ("governor", "current_governor_ro")):
        try:
            out[key] = (cpuidle / name).read_text().strip()
        except OSError:
            continue
    try:
        out["guest_halt_poll_ns"] = int(Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns").read_text())
    except (OSError, ValueError):
        pass
    return out


class CpusAwake:
    """A context: holds the PM QoS CPU latency request at 0 µs (``held``), or says why not
    (``reason``)."""

    def __init__(self, path: Path = PM_QOS_CPU):
        self.path = Path(path)
        self.fd: int | None = None
        self.reason: str | None = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def record(self) -> dict[str, Any]:
        """run.json's ``cpu_awake``."""
        return {"held": True} if self.held else {"held": False, "reason": self.reason}

    def __enter__(self) -> "CpusAwake":
        try:
            fd = os.open(self.path, os.O_WRONLY)
        except OSError as e:
            self.reason = f"cannot open {self.path}: {e.strerror or e}"
            log.warning("run.keep_cpus_awake: %s; idle CPUs may sleep (docs/embedded.md, \"Idle CPUs\")",
                        self.reason)
            return self
        try:
            os.write(fd, struct.pack("i", 0))
        except OSError as e:
            os.close(fd)
            self.reason = f"cannot write {self.path}: {e.strerror or e}"
            log.warning("run.keep_cpus_awake: %s", self.reason)
            return self
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)      # the request ends with the file's last close
            self.fd = None


__all__ = ["CPUIDLE", "PM_QOS_CPU", "CpusAwake", "idle_states"]
