"""The analysis beyond one machine: a real Spark standalone cluster (a Master and a Worker
started from pyspark's own ``bin/spark-class`` on 127.0.0.1) and a real Spark Connect server
(``spark-submit --class ...SparkConnectServer``, its tasks in its own JVM). ``ssbench analyze --master
spark://...`` and ``--remote sc://...`` must give the same tables and plots as local mode.

The local reference is ``ssbench analyze -q`` in a process of its own, as a user runs it, on a
machine without the Spark JVM's class-data-sharing archive (harness.analysis.spark): that first
local analysis writes it (support.cds.first_analysis: on a machine without the suite's archive,
the suite runs it first and installs the archive it wrote as the suite's, tests/conftest.py).
Its JVM claims the archive when it starts, so JVMs started meanwhile neither wait for it nor
write their own, and the analysis waits for its JVM to write it and installs it before the
command returns (stop_session), leaving no JVM of its own running to load the machine while the
next command measures; it prints the report path and the key table, nothing else (nothing from
Spark or the JVM, its archive's writing included). write_archive() (the suite's fallback when
that analysis wrote none) ends the same way.

Sized for a 2-core machine: the worker offers 1 core and 1 GB, every daemon is stopped at the
end of the module, also when a test fails."""

from __future__ import annotations

import csv
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.ports import free_port
from support import cds

REPO = Path(__file__).resolve().parents[2]

try:
    import pyspark

    SPARK_HOME = Path(pyspark.__file__).resolve().parent
except ImportError:  # pragma: no cover
    SPARK_HOME = Path("/nonexistent")
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                       reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)"),
    pytest.mark.skipif(not SPARK_CLASS.exists(), reason="pyspark's bin/spark-class is missing"),
]

TABLES = ("permutations", "dialog_gains", "crossover", "top_waits", "wait_profile", "repetitions",
          "queue_timeseries", "issues")


#: short-lived JVMs on 2 cores: one GC thread, the C1 compiler only (see harness.analysis.spark)
SMALL_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def spark_env() -> dict[str, str]:
    """Every JVM of the module (daemons, executors, the driver, the Connect server) gets its
    options from ``JAVA_TOOL_OPTIONS``, which the worker's executors inherit: the small JVM and
    the suite's class-data archive (Spark's classes as a local analysis loads them; ~3 CPU-s a
    JVM). So no configuration directory: on the class path, it would make the JDK refuse the
    archive."""
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="512m",
               JAVA_TOOL_OPTIONS=f"{SMALL_JVM} {cds.installed_options()}".strip(),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               # no REST submission server (it would take the fixed port 6066)
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    for k in ("PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", *cds.OFF_VARS[1:]):
        env.pop(k, None)
    return env


class Daemon:
    """A JVM started by this test, in its own process group (the worker's executors join the
    worker's group), logging to a file."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path):
        self.name = name
        self.log = log_dir / f"{name}.log"
        self._fh = self.log.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self._fh, stderr=subprocess.STDOUT, env=env,
                                     cwd=log_dir, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text()):
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.text()[-3000:]}")
            time.sleep(0.3)
        raise AssertionError(f"{self.name}: no {pattern!r} after {timeout} s:\n{self.text()[-3000:]}")

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)  # the group this test created
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
            try:  # executors and other children left in the group
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        finally:
            self._fh.close()


class Cluster:
    def __init__(self, base: Path):
        self.base = base
        base.mkdir(parents=True)
        self.env = spark_env()
        self.work_dir = base / "work"
        self.work_dir.mkdir()
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.daemons: list[Daemon] = []

    def start(self) -> None:
        master = Daemon("master", [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", str(self.port),
                                   "--webui-port", str(free_port())], self.env, self.base)
        self.daemons.append(master)
        master.wait_for(r"I have been elected leader")
        worker = Daemon("worker", [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker",
                                   "--host", "127.0.0.1", "--port", str(free_port()),
                                   "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                                   "--work-dir", str(self.work_dir), self.url], self.env, self.base)
        self.daemons.append(worker)
        worker.wait_for(r"Successfully registered with master")

    def start_connect(self) -> str:
        """A Spark Connect server running its tasks in its own JVM (local[1]): what ssbench
        does is the thin client's, whatever master the server has, and the executor JVM a
        cluster would add costs the suite several CPU-seconds to show nothing more."""
        port = free_port()
        server = Daemon("connect", [str(SPARK_SUBMIT), "--class",
                                    "org.apache.spark.sql.connect.service.SparkConnectServer",
                                    "--name", "ssbench-connect-test", "--master", "local[1]",
                                    "--driver-memory", "1g",
                                    "--conf", "spark.ui.enabled=false",
                                    "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                                    "--conf", f"spark.connect.grpc.binding.port={port}"],
                        self.env, self.base)
        self.daemons.append(server)
        server.wait_for(r"Spark Connect server started at", timeout=120)
        return f"sc://127.0.0.1:{port}"

    def stop(self) -> None:
        for d in reversed(self.daemons):  # connect server, worker (and its executors), master
            d.stop()

    def executor_logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.work_dir.glob("app-*/*/stderr"))


def run_analyze(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(env, PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "harness.cli", "analyze", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def local_run(base):
    """The local-mode analysis (the reference): ``ssbench analyze -q`` started in a cache without
    an archive, what was seen while it ran and once it returned (its run and report directories,
    its output, the archive's claims, the options a JVM started meanwhile got, the processes still
    writing the archive). The suite's own when it made one (a machine without the suite's
    archive: tests/conftest.py), else one of this module's."""
    seen = cds.shared_first_analysis() or cds.first_analysis(base / "first")
    seen["env"] = cds.env(seen["cache"])
    return seen


@pytest.fixture(scope="module")
def run_dir(local_run) -> Path:
    return local_run["run_dir"]


@pytest.fixture(scope="module")
def cluster(base):
    c = Cluster(base / "spark")
    try:
        c.start()
        yield c
    finally:
        c.stop()


# --------------------------------------------------------------------------- helpers

def _cells_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    except ValueError:
        return False


def assert_same_report(ref: Path, other: Path) -> None:
    """The same CSV tables (cell by cell, floats to 1e-9), Parquet tables and plots."""
    for name in TABLES:
        with (ref / "tables" / f"{name}.csv").open(newline="") as f:
            want = list(csv.reader(f))
        with (other / "tables" / f"{name}.csv").open(newline="") as f:
            got = list(csv.reader(f))
        assert got[0] == want[0], f"{name}.csv: columns differ"
        assert len(got) == len(want), f"{name}.csv: {len(got)} rows, local mode has {len(want)}"
        for i, (gr, wr) in enumerate(zip(got, want)):
            bad = [(c, g, w) for c, g, w in zip(want[0], gr, wr) if not _cells_equal(g, w)]
            assert not bad, f"{name}.csv row {i}: (column, got, local) {bad[:5]}"
    assert len(list((ref / "tables" / "permutations.csv").open())) > 1  # not comparing empty tables
    parquet = sorted(p.name for p in (ref / "tables").glob("*.parquet"))
    assert parquet and sorted(p.name for p in (other / "tables").glob("*.parquet")) == parquet
    for p in parquet:
        assert (other / "tables" / p).stat().st_size > 0, f"{p}: no data"
    plots = sorted(p.name for p in (ref / "plots").glob("*.png"))
    assert len(plots) >= 5
    assert sorted(p.name for p in (other / "plots").glob("*.png")) == plots
    for p in plots:
        assert (other / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (other / "index.html").read_text()
    for p in plots:
        assert f"plots/{p}" in html


# --------------------------------------------------------------------------- tests

def key_table(stdout: str) -> list[str]:
    """The key table ssbench analyze ends with (after the report's path)."""
    lines = stdout.strip().splitlines()
    return lines[lines.index(next(x for x in lines if x.startswith("Key results"))):]


def _reference(local_run) -> str:
    assert local_run["rc"] == 0, local_run["stderr"][-3000:]
    return local_run["stdout"]


WRITE = "from harness.analysis import spark; print(spark.archive_missing()); print(spark.write_archive())"


def test_one_jvm_writes_the_archive_and_the_analysis_returns_once_it_is_written(local_run):
    cache, env, out, err = local_run["cache"], local_run["env"], local_run["stdout"], local_run["stderr"]
    claims = local_run["claims"]
    assert len(claims) == 1, (claims, local_run["poll"])
    # claimed when its JVM starts: a JVM started meanwhile runs without an archive and
    # writes none of its own
    assert local_run["meanwhile"] == ("", claims)
    assert local_run["rc"] == 0, err[-3000:]
    # -q: the report's path, then the key table, and nothing from Spark or the JVM: "WARNING:
    # Using incubator modules", "Setting default log level", log4j lines, Python warnings
    lines = out.splitlines()
    assert lines[:2] == [str((local_run["out"] / "index.html").resolve()), ""], out
    table = key_table(out)
    assert table[0] == "Key results: 0 of 2 comparisons decided", out        # one repetition a side
    assert sum(x.startswith("durable  trick150 vs per_thread") and "inconclusive" in x for x in table) == 2, out
    assert err == "", err[-2000:]
    # when the command returns, its JVM has written the archive and is gone, and the
    # archive is installed: the part became it
    assert local_run["left"] == [], f"a JVM of the analysis still runs after it returned: {local_run['left']}"
    (path,) = [str(p) for p in cache.glob("spark-cds-*")]
    assert path.endswith(".jsa") and os.path.getsize(path) > 0, err[-3000:]
    # the next JVM uses it at once (not 120 s later, as when its writer is not waited for)
    assert cds.options(env).startswith(f"-XX:SharedArchiveFile={path}")
    r = subprocess.run([sys.executable, "-c", WRITE], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", path], r.stderr[-2000:]   # there already: nothing to write


def test_standalone_cluster_gives_the_local_report(cluster, run_dir, local_run, base):
    out = base / "report-cluster"
    # the driver JVM with the daemons' options (cluster.env): a cluster's driver gets neither the
    # local JVM's options nor its class-data archive (harness.analysis.spark), and on 2 cores its
    # C2 compilations would cost about as much CPU as the rest of the analysis
    proc = run_analyze([str(run_dir), "--master", cluster.url, "--out", str(out)], base, cluster.env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[0] == str((out / "index.html").resolve())
    assert key_table(proc.stdout) == key_table(_reference(local_run))
    assert f"on {cluster.url} ready" in proc.stderr
    # the work was done by the worker's executor, not in the driver
    assert re.search(r"Registering app ssbench-analyze", cluster.daemons[0].text())
    assert re.search(r"Asked to launch executor", cluster.daemons[1].text())
    assert re.search(r"Running task|Finished task", cluster.executor_logs())
    assert f"Picked up JAVA_TOOL_OPTIONS: {SMALL_JVM}" in cluster.executor_logs()   # the small JVM's options
    assert_same_report(local_run["out"], out)


def test_spark_connect_gives_the_local_report(cluster, run_dir, local_run, base):
    pytest.importorskip("pyarrow", reason="the Spark Connect client needs pip install 'ssbench[connect]'")
    pytest.importorskip("grpc", reason="the Spark Connect client needs pip install 'ssbench[connect]'")
    remote = cluster.start_connect()
    out = base / "report-connect"
    proc = run_analyze([str(run_dir), "--remote", remote, "--out", str(out)], base, cluster.env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[0] == str((out / "index.html").resolve())
    assert key_table(proc.stdout) == key_table(_reference(local_run))
    assert f"on {remote} ready" in proc.stderr
    assert_same_report(local_run["out"], out)


def test_no_class_data_archive_with_a_configuration_directory_on_the_class_path(tmp_path):
    """SPARK_CONF_DIR goes on the JVM's class path; the JDK then refuses a dynamic CDS archive
    (printing 'Cannot have non-empty directory in paths' when the JVM exits), so none is used.
    Asked in a process of its own: one whose JVM already runs (a Spark test before this one in
    the same xdist worker) gets no options whatever the environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SSBENCH_SPARK_CDS", "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR",
                        "SPARK_DIST_CLASSPATH")}
    env["SSBENCH_CACHE"] = str(tmp_path)
    code = "from harness.analysis import spark; print(' '.join(spark._cds_options('-XX:+UseSerialGC')))"

    def options(extra):
        return subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**env, **extra}, capture_output=True,
                              text=True, timeout=60, check=True).stdout.strip()

    assert options({"SPARK_CONF_DIR": str(tmp_path)}) == ""
    assert "-XX:ArchiveClassesAtExit=" in options({})     # without it: this machine's first archive
