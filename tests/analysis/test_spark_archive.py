"""The Spark JVM's class-data-sharing archive (harness.analysis.spark). The first local
analysis on a machine writes it: its JVM claims it when it starts, so JVMs started meanwhile
neither wait for it nor write their own, and the analysis waits for its JVM to write it and
installs it before the command returns (stop_session), leaving no JVM of its own running to
load the machine while the next command measures. write_archive() (what the suite does first on
a machine without one, tests/conftest.py) ends the same way. Real JVMs.

That analysis is ``ssbench analyze -q``, as a user runs it: it prints the report path and the
key table, nothing else (nothing from Spark or the JVM, its archive's writing included)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from support import cds, synth
from support.embedded import REPO

pytestmark = [pytest.mark.slow, pytest.mark.spark]

WRITE = "from harness.analysis import spark; print(spark.archive_missing()); print(spark.write_archive())"


def _java_writing(part: str) -> list[int]:
    """The processes whose command line names ``part`` (a JVM writing the archive there)."""
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and part.encode() in open(f"/proc/{d}/cmdline", "rb").read():
                out.append(int(d))
        except OSError:
            pass
    return out


def test_one_jvm_writes_the_archive_and_the_analysis_returns_once_it_is_written(tmp_path):
    cache, results = tmp_path / "cache", tmp_path / "results"
    env = cds.env(cache)
    spec = synth.SynthSpec(name="cds", initiators=(1,), threads=(1, 10), dialogs=("per_thread", "trick150"),
                           payloads=(100,), servers=("durable",), repetitions=1, warmup_seconds=1, measure_seconds=3,
                           drain_seconds=1)
    run = synth.synthesize(results, spec, run_id="20261125-000000-cds")
    # output to files, not pipes: a JVM left running would hold a pipe open, and reading it to
    # its end would wait for that JVM too
    log, err_log = (tmp_path / "analyze.out").open("w"), (tmp_path / "analyze.err").open("w")
    writer = subprocess.Popen([sys.executable, "-m", "harness.cli", "analyze", "-q", str(run), "--out",
                               str(tmp_path / "report")], cwd=REPO, env=env, stdout=log, stderr=err_log)
    try:
        deadline = time.monotonic() + 60
        while not list(cache.glob("spark-cds-*.part")) and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        claims = list(cache.glob("spark-cds-*.part"))
        assert len(claims) == 1, (claims, writer.poll())
        # claimed when its JVM starts: a JVM started meanwhile runs without an archive and
        # writes none of its own
        assert cds.options(env) == ""
        assert list(cache.glob("spark-cds-*")) == claims
        writer.wait(timeout=900)
        # when the command returns, its JVM has written the archive and is gone, and the
        # archive is installed: the part became it
        left = _java_writing(str(claims[0]))
    finally:
        if writer.poll() is None:
            writer.kill()
        log.close()
        err_log.close()
    out, err = (tmp_path / "analyze.out").read_text(), (tmp_path / "analyze.err").read_text()
    assert writer.returncode == 0, err[-3000:]
    # -q: the report's path, then the key table, and nothing from Spark or the JVM: "WARNING:
    # Using incubator modules", "Setting default log level", log4j lines, Python warnings
    lines = out.splitlines()
    assert lines[:2] == [str((tmp_path / "report" / "index.html").resolve()), ""], out
    table = lines[lines.index(next(x for x in lines if x.startswith("Key results"))):]
    assert table[0] == "Key results: 0 of 2 comparisons decided", out        # one repetition a side
    assert sum(x.startswith("durable  trick150 vs per_thread") and "inconclusive" in x for x in table) == 2, out
    assert err == "", err[-2000:]
    assert left == [], f"a JVM of the analysis still runs after it returned: {left}"
    (path,) = [str(p) for p in cache.glob("spark-cds-*")]
    assert path.endswith(".jsa") and os.path.getsize(path) > 0, err[-3000:]
    # the next JVM uses it at once (not 120 s later, as when its writer is not waited for)
    assert cds.options(env).startswith(f"-XX:SharedArchiveFile={path}")
    r = subprocess.run([sys.executable, "-c", WRITE], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", path], r.stderr[-2000:]   # there already: nothing to write
