"""The SparkSession the analysis runs in.

Local by default (``local[*]``), any master when given (``--master spark://host:7077``,
``local[2]``, ...). Under ``spark-submit`` the master and settings spark-submit was given are
kept. The UI is off, the driver binds to 127.0.0.1 when local, shuffles use few partitions
(the aggregated tables are small) and Spark's console chatter is cut to errors.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import UserError

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


#: JVM options of a local analysis (override with SSBENCH_SPARK_JAVA_OPTS). A short job on a
#: cold JVM spends most of its CPU compiling: the C1 compiler alone (no C2) and the serial
#: collector roughly halve the CPU time of a small analysis on 2 cores.
LOCAL_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


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
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        os.replace(tmp, path)
    return str(path)


def get_spark(master: str | None = None, app_name: str = "ssbench-analyze", *,
              shuffle_partitions: int | None = None, driver_memory: str | None = None,
              extra_conf: dict[str, str] | None = None):
    """Build (or return the already running) SparkSession.

    ``master``: None keeps a master set by spark-submit (or PYSPARK_SUBMIT_ARGS) and otherwise
    uses ``local[*]``. ``driver_memory`` only takes effect when this call starts the JVM
    (default 2g, or SSBENCH_SPARK_DRIVER_MEMORY).
    """
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
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.sources.partitionOverwriteMode": "static",
    }
    if local:
        # list input files on the driver: a distributed listing job for thousands of local
        # files costs ~10x more than the listing itself
        settings["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "1000000"
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
    if not conf.contains("spark.driver.memory"):
        settings["spark.driver.memory"] = driver_memory or os.environ.get("SSBENCH_SPARK_DRIVER_MEMORY", "2g")
    if not conf.contains("spark.driver.extraJavaOptions"):
        opts = f"-Dlog4j.configurationFile=file:{_log4j_file()}"
        if local:
            opts += " " + os.environ.get("SSBENCH_SPARK_JAVA_OPTS", LOCAL_JAVA_OPTS)
        settings["spark.driver.extraJavaOptions"] = opts
    settings.update(extra_conf or {})
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
