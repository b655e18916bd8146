"""A process's CPU quota from its cgroups (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``).

A server in a container (``docker --cpus``, a Kubernetes CPU limit) or under a systemd
``CPUQuota`` may use fewer CPUs' worth of time than its affinity allows: the host collector
reads the share of the quota its cgroup used, so that a server at its quota is diagnosed
CPU-bound. The smallest quota on the way up from the process's cgroup to the root counts.

Only the standard library: tests/support/machine.py and tools/slow-machine read this process's
quota with it before the venv exists."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def _proc(pid: int | None, name: str) -> Path:
    return Path("/proc") / ("self" if pid is None else str(int(pid))) / name


def _mounts() -> list[tuple[Path, str, set[str]]]:
    """(mount point, type, super options) of the cgroup file systems ([] where there are none)."""
    out = []
    try:
        lines = _proc(None, "mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype, _, opts = (right.split() + ["", "", ""])[:3]
        if fstype in ("cgroup", "cgroup2"):
            out.append((Path(left.split()[4]), fstype, set(opts.split(","))))
    return out


def own_cgroup(controller: str, pid: int | None = None) -> str:
    """The cgroup path of ``pid`` (None: this process) in the v1 hierarchy of ``controller``
    ('': the v2 one)."""
    try:
        lines = _proc(pid, "cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or (controller and controller in ctrls.split(",")):
            return path
    return "/"


def cgroup_dirs(controller: str, fstype: str = "cgroup", pid: int | None = None) -> list[tuple[Path, Path]]:
    """(mount point, the process's own cgroup directory) in the hierarchies of ``controller``
    (v1) or, with ``fstype`` 'cgroup2', in the unified one."""
    out = []
    for mnt, kind, opts in _mounts():
        if kind == fstype == "cgroup2":
            out.append((mnt, mnt / own_cgroup("", pid).lstrip("/")))
        elif kind == fstype == "cgroup" and controller in opts:
            out.append((mnt, mnt / own_cgroup(controller, pid).lstrip("/")))
    return out


@dataclass(frozen=True)
class CpuQuota:
    """The cgroup whose CPU quota limits a process: ``cpus`` CPUs' worth of time."""

    cpus: float
    cgroup: Path
    v2: bool

    def usage_seconds(self) -> float | None:
        """The cgroup's CPU time so far, everything in it, or None: v2 ``cpu.stat`` usage_usec;
        v1 ``cpuacct.usage`` where cpuacct is mounted with cpu, else its live processes' CPU
        time (/proc/<pid>/stat: a process that ended in between takes its time with it)."""
        try:
            if self.v2:
                for line in (self.cgroup / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
                return None
            if (self.cgroup / "cpuacct.usage").exists():
                return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
            procs = (self.cgroup / "cgroup.procs").read_text().split()
        except (OSError, ValueError):
            return None
        ticks = 0
        for pid in procs:
            try:   # utime and stime: the 14th and 15th fields, after the command's parenthesis
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
                ticks += int(fields[11]) + int(fields[12])
            except (OSError, ValueError, IndexError):
                continue
        return ticks / os.sysconf("SC_CLK_TCK")


def quota_of(pid: int | None = None) -> CpuQuota | None:
    """The smallest cgroup CPU quota on the way up from ``pid``'s (None: this process's) own
    cgroup to the root, v2 or v1, or None when none is set or none can be read."""
    found = []
    for fstype, read in (("cgroup2", _v2_quota), ("cgroup", _v1_quota)):
        for mnt, path in cgroup_dirs("cpu", fstype, pid):
            while True:
                q = read(path)
                if q is not None:
                    found.append(CpuQuota(q, path, fstype == "cgroup2"))
                if path == mnt or path == path.parent:
                    break
                path = path.parent
    return min(found, key=lambda q: q.cpus) if found else None


def cpu_quota(pid: int | None = None) -> float | None:
    """The CPUs' worth of time ``pid`` (None: this process) may use, or None: no quota."""
    q = quota_of(pid)
    return q.cpus if q else None


def _v2_quota(path: Path) -> float | None:
    try:
        limit, period = (path / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if limit == "max" else int(limit) / int(period)


def _v1_quota(path: Path) -> float | None:
    try:
        limit = int((path / "cpu.cfs_quota_us").read_text())
        period = int((path / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if limit <= 0 else limit / period
