"""The Spark class-data-sharing archive as a fresh process sees it: an environment with the
archive on and a cache of its own, and the JVM options a local analysis started in it would get
(harness.analysis.spark._cds_options, run in a process whose JVM has not started).

The first local analysis on a machine writes the archive: :func:`first_analysis` runs one, an
``ssbench analyze -q`` in an empty cache, and keeps what was seen while it ran and once it
returned. On a machine without the suite's archive the suite does this before any test
(tests/conftest.py) and installs the archive it wrote as the suite's, so the archive is written
once a run, not once for the suite and once more for tests/analysis/test_analysis_cluster.py,
which checks what was seen (:func:`shared_first_analysis`) and compares the cluster's and
Spark Connect's reports with its report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: what turns the archive off (SSBENCH_SPARK_CDS=0, or a configuration directory on the class path)
OFF_VARS = ("SSBENCH_SPARK_CDS", "SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")


def env(cache: Path) -> dict[str, str]:
    """This process's environment with the archive on, kept in ``cache``."""
    return {**{k: v for k, v in os.environ.items() if k not in OFF_VARS}, "SSBENCH_CACHE": str(cache)}


def options(env: dict[str, str]) -> str:
    """The CDS options a local analysis started now in ``env`` would get."""
    code = "from harness.analysis import spark; print(' '.join(spark._cds_options(spark.LOCAL_JAVA_OPTS)))"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def installed_options() -> str:
    """The JVM options that use the local analysis' installed archive (the suite writes it first,
    tests/conftest.py), for a JVM the suite starts itself (spark-submit, a Connect server): the
    same Spark classes, loaded without parsing and verifying them again (~3 CPU-s a JVM). Empty
    when there is none: nothing is claimed or written here, unlike a local analysis' first start."""
    from harness.analysis import spark

    final = spark._local_archive()
    if final is None or not spark._installed(final):
        return ""
    return f"-XX:SharedArchiveFile={final} -Xlog:cds*=off"


#: where the suite's first analysis is kept for the tests (tests/conftest.py sets it)
SHARED_VAR = "SSBENCH_TEST_FIRST_ANALYSIS"


def synthesize_run(results: Path) -> Path:
    """The run the first analysis, the standalone cluster and Spark Connect analyse: 2 thread
    counts x 2 strategies, one repetition each."""
    from support import synth

    spec = synth.SynthSpec(name="cluster", initiators=(1,), threads=(1, 10), dialogs=("per_thread", "trick150"),
                           payloads=(100,), servers=("durable",), repetitions=1, warmup_seconds=1,
                           measure_seconds=3, drain_seconds=1)
    return synth.synthesize(results, spec, run_id="20261122-000000-cluster")


def _java_writing(part: str) -> list[int]:
    """The processes whose command line names ``part`` (a JVM writing the archive there)."""
    found = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and part.encode() in open(f"/proc/{d}/cmdline", "rb").read():
                found.append(int(d))
        except OSError:
            pass
    return found


def first_analysis(base: Path) -> dict:
    """``ssbench analyze -q`` of :func:`synthesize_run`'s run started in ``base``/cache, a cache
    without an archive: its report's directory, its output, the archive's claims, the options a
    JVM started meanwhile got, the processes still writing the archive once it returned."""
    base.mkdir(parents=True, exist_ok=True)
    run_dir = synthesize_run(base / "results")
    cache, out = base / "cache", base / "report-local"
    # output to files, not pipes: a JVM left running would hold a pipe open, and reading it to
    # its end would wait for that JVM too
    log, err_log = (base / "analyze.out").open("w"), (base / "analyze.err").open("w")
    writer = subprocess.Popen([sys.executable, "-m", "harness.cli", "analyze", "-q", str(run_dir), "--out", str(out)],
                              cwd=REPO, env=env(cache), stdout=log, stderr=err_log)
    seen = {"run_dir": run_dir, "cache": cache, "out": out}
    try:
        deadline = time.monotonic() + 60
        while not list(cache.glob("spark-cds-*.part")) and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["claims"] = claims = list(cache.glob("spark-cds-*.part"))
        seen["meanwhile"] = (options(env(cache)), list(cache.glob("spark-cds-*"))) if claims else None
        seen["poll"] = writer.poll()
        writer.wait(timeout=900)
        seen["left"] = _java_writing(str(claims[0])) if len(claims) == 1 else None
    finally:
        if writer.poll() is None:
            writer.kill()
        log.close()
        err_log.close()
    seen.update(rc=writer.returncode, stdout=(base / "analyze.out").read_text(),
                stderr=(base / "analyze.err").read_text())
    return seen


def share_first_analysis(base: Path) -> Path | None:
    """The suite's first step on a machine without its archive: :func:`first_analysis` in
    ``base``, what it saw kept for :func:`shared_first_analysis`, and the archive it wrote
    installed in the suite's cache (the same key: this Java, pyspark and options). Returns the
    suite's archive, or None when the analysis wrote none."""
    from harness.analysis import spark

    final = spark._local_archive()
    seen = first_analysis(base)
    doc = {k: (str(v) if isinstance(v, Path) else v) for k, v in seen.items()}
    doc["claims"] = [str(p) for p in seen["claims"]]
    if seen["meanwhile"] is not None:
        doc["meanwhile"] = [seen["meanwhile"][0], [str(p) for p in seen["meanwhile"][1]]]
    (base / "seen.json").write_text(json.dumps(doc))
    if final is None:
        return None
    written = seen["cache"] / final.name
    if written.is_file() and not spark._installed(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(f"{final.name}.{os.getpid()}.copy")
        try:
            os.link(written, part)          # one file, two names: the test's cache keeps its own
        except OSError:
            shutil.copyfile(written, part)
        os.replace(part, final)
    return final if spark._installed(final) else None


def shared_first_analysis() -> dict | None:
    """What the suite's first analysis saw (:func:`share_first_analysis`), or None when this run
    did not make one (the machine had the suite's archive, or it was not asked)."""
    d = os.environ.get(SHARED_VAR)
    if not d or not (Path(d) / "seen.json").is_file():
        return None
    seen = json.loads((Path(d) / "seen.json").read_text())
    for k in ("run_dir", "cache", "out"):
        seen[k] = Path(seen[k])
    seen["claims"] = [Path(p) for p in seen["claims"]]
    if seen["meanwhile"] is not None:
        seen["meanwhile"] = (seen["meanwhile"][0], [Path(p) for p in seen["meanwhile"][1]])
    return seen
