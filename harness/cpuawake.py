"""Idle CPUs kept awake while a run measures (``run.keep_cpus_awake``).

On a virtual machine a halted vCPU's wake-up time follows the host's load, and a ping-pong's
rate with it (docs/findings/idle-cpus.md). Holding ``/dev/cpu_dma_latency`` open with 0 written
makes the cpuidle governor poll instead (Linux PM QoS); closing it ends the request, so a killed
run leaves nothing behind. It costs host CPU, so it lasts for the run only, where the matrix
asks; without write access (root) the run goes on and records why.
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

