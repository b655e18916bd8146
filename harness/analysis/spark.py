"""The SparkSession the analysis runs in.

Local (``local[*]``) by default, any ``--master``, or Spark Connect (``--remote``;
docs/analysis-cluster.md); under ``spark-submit`` its settings are kept. Local sessions are
tuned for small inputs on few cores (:data:`LOCAL_JAVA_OPTS`: serial GC, C1 only, an AppCDS
archive in the cache); docs/environment.md lists the variables that change them and
docs/findings/spark-settings.md the measurements behind them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from ..errors import UserError
from ..results import write_atomic
from .. import environment

JAVA_HELP = ("Java 17 or newer is required by Spark (the analysis step). Install it, e.g. "
             "'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu) or 'brew install openjdk@17' "
             "(macOS), or set JAVA_HOME to an existing JDK 17+.")

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


#: JVM options of a local analysis (SSBENCH_SPARK_JAVA_OPTS replaces them): the serial
#: collector (no GC threads competing for 2 cores); for small inputs (< SMALL_INPUT_BYTES of
#: samples) the C1 compiler alone, whose compilations pay back in a short job; and a
#: class-data-sharing archive of Spark's classes (AppCDS, _cds_options). Each is kept because a
#: side-by-side measurement justified it (docs/findings/analysis-time.md).
LOCAL_JAVA_OPTS = "-XX:+UseSerialGC"
SMALL_INPUT_OPTS = "-XX:TieredStopAtLevel=1"
SMALL_INPUT_BYTES = 50 * 1024 * 1024
#: SQL settings of a local analysis of small inputs: expressions interpreted, no generated code
#: (each query plan's generated Java is compiled by Janino and the JIT, which never pays back on
#: a few thousand rows; on 190 MiB of samples it does). ``factoryMode`` is Spark's internal
#: switch; the results are the same (tests/analysis compare them with a standalone cluster's).
SMALL_INPUT_SQL = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def java_executable() -> str | None:
    """The java binary Spark will use (JAVA_HOME first, like Spark's launcher), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        cand = Path(home) / "bin" / "java"
        if cand.exists():
            return str(cand)
    return shutil.which("java")


def check_java(min_major: int = 17) -> str:
    """Raise UserError (with how to get Java 17) unless a Java >= ``min_major`` is found.
    Returns the version string."""
    java = java_executable()
    if not java:
        raise UserError(f"Java was not found (no JAVA_HOME, no java on PATH). {JAVA_HELP}")
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(f"cannot run {java} -version ({e}). {JAVA_HELP}") from None
    text = proc.stderr + proc.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise UserError(f"cannot tell the version of {java}. {JAVA_HELP}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_..." is Java 8
        major = int(m.group(2))
    if major < min_major:
        raise UserError(f"{java} is Java {major}; Spark needs Java {min_major} or newer. {JAVA_HELP}")
    return m.group(0)


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / f"ssbench-log4j2-{os.getuid() if hasattr(os, 'getuid') else 0}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        write_atomic(path, _LOG4J)
    return str(path)


def cache_dir() -> Path:
    """ssbench's cache directory: SSBENCH_CACHE, else $XDG_CACHE_HOME/ssbench or ~/.cache/ssbench."""
    if environment.get("SSBENCH_CACHE"):
        return Path(environment.get("SSBENCH_CACHE"))
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ssbench"


def _cds_options(gc_opts: str) -> list[str]:
    """JVM options for an AppCDS archive of the classes Spark loads (JDK 13+ dynamic archive).

    The first local analysis runs with ``-XX:ArchiveClassesAtExit``: its JVM writes
    ``<cache>/spark-cds-<key>.<pid>.part`` when it exits, and :func:`stop_session` waits for it
    and installs it; later starts use ``-XX:SharedArchiveFile``. The key covers java, pyspark
    and the GC options, so a changed installation makes a new archive; the JVM ignores an
    unusable one (-Xshare:auto). The part is claimed when the JVM starts, so JVMs started
    meanwhile run without an archive instead of each writing one; a part whose writer died
    before installing it is discarded, never installed. Off with SSBENCH_SPARK_CDS=0
    or a Spark or Hadoop configuration directory (the JDK refuses directories on the class path).
    """
    global _ARCHIVING
    if not environment.flag("SSBENCH_SPARK_CDS"):
        return []
    # a non-empty directory on the JVM's class path (Spark puts these configuration directories
    # there) makes the JDK refuse a dynamic archive, printing an error when the JVM exits
    for var in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH"):
        if os.environ.get(var):
            return []
    try:
        from pyspark import SparkContext

        if SparkContext._gateway is not None:   # this process's JVM runs: its options are set
            return []
        paths = _archive(gc_opts)
        if paths is None:
            return []
        d, key, final = paths
        quiet = "-Xlog:cds*=off"
        if _installed(final):
            os.utime(final)         # its last use: _prune_archives keeps the recently used
            return [f"-XX:SharedArchiveFile={final}", quiet]
        d.mkdir(parents=True, exist_ok=True)
        for part in d.glob(f"spark-cds-{key}.*.part"):
            try:
                pid = int(part.name.split(".")[1])
            except ValueError:
                part.unlink(missing_ok=True)
                continue
            age = time.time() - part.stat().st_mtime
            if psutil.pid_exists(pid) or age < 120:   # its JVM may still be running or writing it
                return []
            # its writer died before installing it: its JVM may have ended early (a killed or
            # failed job) and archived only the classes loaded by then, a valid archive that
            # would leave every later JVM loading the rest (about 3 CPU-s each): written again
            part.unlink(missing_ok=True)
        _prune_archives(d, key)
        part = d / f"spark-cds-{key}.{os.getpid()}.part"
        # claimed at once (the JVM replaces the file when it exits): a JVM started meanwhile
        # sees a live writer and neither waits nor writes an archive of its own
        part.touch()
        _ARCHIVING = (part, final)
        return [f"-XX:ArchiveClassesAtExit={part}", quiet]
    except Exception:  # a cache is never a reason to fail
        return []


def _archive(gc_opts: str) -> tuple[Path, str, Path] | None:
    """The cache directory, key and path of the AppCDS archive for this Java, pyspark and GC
    options (None without Java)."""
    import hashlib

    import pyspark

    java = java_executable()
    if not java:
        return None
    real = os.path.realpath(java)
    st = os.stat(real)
    ident = f"{real}|{st.st_size}|{st.st_mtime_ns}|{pyspark.__file__}|{pyspark.__version__}|{gc_opts}"
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    d = cache_dir()
    return d, key, d / f"spark-cds-{key}.jsa"


KEEP_ARCHIVES = 2
"""Other keys' archives kept when a new one is written: the most recently used. Each Java,
pyspark installation (a fresh clone's venv is one) and GC option set has its own, ~180 MB: 28
of them, 4.9 GB, had piled up on one machine where CI runs from fresh clones."""


def _prune_archives(d: Path, key: str, now: float | None = None) -> list[Path]:
    """Remove the archives of keys other than ``key`` but the :data:`KEEP_ARCHIVES` most
    recently used, and other keys' parts whose writer is gone and that are over an hour old.
    A JVM using a removed archive keeps its mapping; one started with it later runs without
    (-Xshare:auto). Returns what it removed."""
    now = time.time() if now is None else now
    gone: list[Path] = []
    others = []
    for p in d.glob("spark-cds-*"):
        name = p.name.split(".")
        if name[0] == f"spark-cds-{key}":
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        if p.suffix == ".jsa":
            others.append((st.st_mtime, p))
        elif p.suffix == ".part":
            pid = int(name[1]) if len(name) == 3 and name[1].isdigit() else 0
            if now - st.st_mtime > 3600 and not (pid and psutil.pid_exists(pid)):
                gone.append(p)
    others.sort(reverse=True)
    gone += [p for _, p in others[KEEP_ARCHIVES:]]
    for p in gone:
        p.unlink(missing_ok=True)
    return gone


def _installed(final: Path) -> bool:
    return final.is_file() and final.stat().st_size > 0


def _local_archive() -> Path | None:
    """Where a local analysis' AppCDS archive is or would be (None: off, or no Java)."""
    if not environment.flag("SSBENCH_SPARK_CDS"):
        return None
    try:
        paths = _archive(LOCAL_JAVA_OPTS)
    except Exception:
        return None
    return paths[2] if paths is not None else None


def archive_missing() -> bool:
    """Whether a local analysis would start without an AppCDS archive that it could have (on,
    Java found, none written yet)."""
    final = _local_archive()
    return final is not None and not _installed(final)


def _archive_job() -> None:
    """write_archive()'s job, in a process of its own: the kinds of work an analysis does
    (JSON, aggregates, a window, parquet, a local checkpoint, rows from Python), so its JVM
    loads the classes they need; prints the archive it installed."""
    import json

    from pyspark.sql import Window, functions as F

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "rows.json"
        src.write_text("\n".join(json.dumps({"k": i % 7, "v": i * 1.5, "s": f"n{i}"}) for i in range(200)))
        spark = get_spark("local[2]", app_name="ssbench-archive", shuffle_partitions=2, input_bytes=0)
        df = spark.read.json(str(src)).localCheckpoint()
        agg = df.groupBy("k").agg(F.count("*").alias("n"), F.avg("v").alias("m"), F.stddev("v").alias("sd"),
                                  F.percentile_approx("v", 0.99).alias("p"), F.collect_list("s").alias("l"))
        top = df.withColumn("r", F.row_number().over(Window.partitionBy("k").orderBy(F.desc("v"))))
        top.join(agg, "k").where("r <= 2").write.mode("overwrite").parquet(str(Path(d) / "out"))
        spark.read.parquet(str(Path(d) / "out")).orderBy("k").collect()
        spark.createDataFrame([(1, "a")], "x int, y string").collect()
        print(stop_session(spark) or "")


def write_archive(timeout: float = 300.0) -> Path | None:
    """Write the AppCDS archive now, when a local analysis would start without one it could
    have (:func:`archive_missing`): a short Spark job in a process of its own, waited for
    (docs/findings/spark-settings.md). Returns the archive, or None
    (off, no Java, or the job failed)."""
    final = _local_archive()
    if final is None or _installed(final):
        return final
    try:
        r = subprocess.run([sys.executable, "-c", "from harness.analysis.spark import _archive_job; _archive_job()"],
                           capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).resolve().parents[2])
    except (OSError, subprocess.SubprocessError):
        return None
    return final if r.returncode == 0 and r.stdout.strip() == str(final) and _installed(final) else None


#: (the part, the archive) when this process's JVM writes the AppCDS archive at its exit
_ARCHIVING: tuple[Path, Path] | None = None


def _wait_while_working(proc: subprocess.Popen, stalled: float, limit: float | None = None) -> bool:
    """Wait for ``proc`` to end for as long as it works: False, with ``proc`` killed and
    reaped, once its CPU time has not grown for ``stalled`` seconds (a hung JVM), or after
    ``limit`` seconds in all (default 10 times ``stalled``: a JVM that spins). A loaded machine
    slows the archive's writing without stopping it; a limit on the wall time alone left the
    JVM writing after the command returned, and one given up on is not left running either."""
    limit = 10 * stalled if limit is None else limit
    last, since = -1.0, time.monotonic()
    end = since + limit
    while True:
        try:
            proc.wait(0.5)
            return True
        except subprocess.TimeoutExpired:
            pass
        try:
            used = sum(psutil.Process(proc.pid).cpu_times()[:2])
        except psutil.Error:
            continue            # ended meanwhile: the next wait reaps it
        now = time.monotonic()
        if used > last:
            last, since = used, now
        elif now - since > stalled:
            break
        if now > end:
            break
    proc.kill()
    proc.wait()
    return False


def stop_session(spark, timeout: float = 120.0) -> Path | None:
    """Stop ``spark``, a session this process started. When its JVM writes the AppCDS archive
    at its exit (:func:`_cds_options`: the first local analysis on a machine), end the JVM,
    wait for it to write the archive and install it at once, so JVMs started from then on use
    it and the command returns with no JVM of its own left running: one writing the archive
    for 10 to 15 s after the command returned loaded the machine while the next command
    measured (a `make bench` run right after the first one on a machine saw other processes
    take 90 % of a core through its first window). Returns the archive installed, or None (no
    archive written by this process, or the JVM stopped working, ``timeout`` seconds without
    using any CPU, or had not ended after ten times ``timeout``)."""
    global _ARCHIVING
    spark.stop()
    if _ARCHIVING is None:
        return None
    from pyspark import SparkContext

    part, final = _ARCHIVING
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return None
    gateway.shutdown()
    proc.stdin.close()          # the gateway JVM exits at the end of its standard input
    working = _wait_while_working(proc, timeout)
    SparkContext._gateway = SparkContext._jvm = None
    _ARCHIVING = None
    if not working:             # killed: its archive, if any, is not whole
        part.unlink(missing_ok=True)
        return None
    if not part.is_file() or part.stat().st_size == 0:
        return None
    os.replace(part, final)
    return final


def local_java_options(input_bytes: int | None = None) -> str:
    """The JVM options of a local analysis of ``input_bytes`` of samples (see LOCAL_JAVA_OPTS)."""
    if environment.get("SSBENCH_SPARK_JAVA_OPTS") is not None:
        return environment.get("SSBENCH_SPARK_JAVA_OPTS")
    opts = [LOCAL_JAVA_OPTS]
    if input_bytes is not None and input_bytes < SMALL_INPUT_BYTES:
        opts.append(SMALL_INPUT_OPTS)
    opts += _cds_options(LOCAL_JAVA_OPTS)
    return " ".join(opts)


def local_sql_settings(input_bytes: int | None = None) -> dict[str, str]:
    """The SQL settings a local analysis of ``input_bytes`` of samples adds: SMALL_INPUT_SQL for
    small inputs unless SSBENCH_SPARK_CODEGEN is on; none for large or unknown inputs."""
    small = input_bytes is not None and input_bytes < SMALL_INPUT_BYTES
    return dict(SMALL_INPUT_SQL) if small and not environment.flag("SSBENCH_SPARK_CODEGEN") else {}


#: SQL settings of every session (classic and Spark Connect)
SQL_SETTINGS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "static",
}


def connect_missing() -> list[str]:
    """The Python modules the Spark Connect client needs that are not installed."""
    import importlib.util

    mods = {"pandas": "pandas", "pyarrow": "pyarrow", "grpc": "grpcio", "grpc_status": "grpcio-status",
            "google.rpc": "googleapis-common-protos", "zstandard": "zstandard"}
    missing = []
    for mod, dist in mods.items():
        try:
            found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(dist)
    return missing


def check_remote(remote: str) -> None:
    """UserError unless ``remote`` is a Spark Connect URL and the client's modules are installed."""
    if not remote.startswith("sc://") or len(remote) <= len("sc://"):
        raise UserError(f"{remote!r} is not a Spark Connect URL (sc://HOST:PORT)", field="--remote")
    missing = connect_missing()
    if missing:
        raise UserError(f"the Spark Connect client needs {', '.join(missing)}: "
                        "pip install 'ssbench[connect]' (or 'pyspark[connect]')", field="--remote")


def get_connect(remote: str, *, shuffle_partitions: int = 32):
    """A Spark Connect session on ``remote`` (``sc://host:port``). The server reads and writes
    the files: the run directories and the report directory must be at the same paths there."""
    check_remote(remote)
    from pyspark.sql import SparkSession

    # only spark.sql.* settings can be changed on a running server
    b = SparkSession.builder.remote(remote)
    for k, v in {**SQL_SETTINGS, "spark.sql.shuffle.partitions": str(shuffle_partitions)}.items():
        b = b.config(k, v)
    return b.getOrCreate()


def get_spark(master: str | None = None, app_name: str = "ssbench-analyze", *,
              shuffle_partitions: int | None = None, driver_memory: str | None = None,
              input_bytes: int | None = None, remote: str | None = None):
    """Build (or return the already running) SparkSession.

    ``master``: None keeps a master set by spark-submit (or PYSPARK_SUBMIT_ARGS) and otherwise
    uses ``local[*]``. ``driver_memory`` only takes effect when this call starts the JVM
    (default 2g, or SSBENCH_SPARK_DRIVER_MEMORY). ``input_bytes``: how much sample data the
    session will read, to choose the local JVM's compiler (see LOCAL_JAVA_OPTS). ``remote``:
    a Spark Connect URL (``sc://host:port``) instead of a master: see :func:`get_connect`.
    """
    if remote:
        if master:
            raise UserError("give either --master or --remote, not both", field="--remote")
        return get_connect(remote, shuffle_partitions=shuffle_partitions or 32)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active

    conf = SparkConf()  # under spark-submit this carries its --master and --conf settings
    chosen = master or (conf.get("spark.master") if conf.contains("spark.master") else None)
    if chosen is None and "--master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        chosen = "local[*]"
    local = chosen is None or chosen.startswith("local")

    b = SparkSession.builder.appName(app_name)
    if chosen:
        b = b.master(chosen)
    if shuffle_partitions is None:
        shuffle_partitions = 4 if local else 32
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        # adaptive execution re-plans every stage: worth it on a cluster, pure overhead for the
        # small shuffles of a local analysis
        "spark.sql.adaptive.enabled": "false" if local else "true",
        **SQL_SETTINGS,
    }
    if local:
        # list input files on the driver: a distributed listing job for thousands of local
        # files costs ~10x more than the listing itself
        settings["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "1000000"
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
        settings.update(local_sql_settings(input_bytes))
    if not conf.contains("spark.driver.memory"):
        settings["spark.driver.memory"] = driver_memory or environment.get("SSBENCH_SPARK_DRIVER_MEMORY")
    if not conf.contains("spark.driver.extraJavaOptions"):
        opts = f"-Dlog4j.configurationFile=file:{_log4j_file()}"
        if local:
            opts += " " + local_java_options(input_bytes)
        settings["spark.driver.extraJavaOptions"] = opts
    for k, v in settings.items():
        b = b.config(k, v)
    since = time.time()
    try:
        spark = b.getOrCreate()
    except BaseException:
        _end_descendants(since)
        raise
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _end_descendants(since: float) -> None:
    """Kill what this process started from ``since`` on: the gateway JVM and its launcher.
    Interrupted (Ctrl-C, SIGTERM) while the JVM starts, PySpark leaves it running for good (its
    gateway thread outlives a main thread that failed on the connection file PySpark removed)."""
    for p in psutil.Process().children(recursive=True):
        try:
            if p.create_time() >= since - 0.5:    # the clock's and /proc's roundings
                p.kill()
        except psutil.Error:
            pass
