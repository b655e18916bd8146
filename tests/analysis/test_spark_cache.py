"""What the Spark class-data-sharing archives leave in ssbench's cache (harness.analysis.spark
._prune_archives): each Java, pyspark installation and GC option set has an archive of its own
(~180 MB), and a machine where CI runs from fresh clones makes a new one per clone. Writing a
new one removes all but the most recently used others, and other keys' abandoned parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from harness.analysis import spark
from support import cds


def _file(path, age: float, now: float):
    path.write_bytes(b"x")
    os.utime(path, (now - age, now - age))
    return path


def test_a_new_archive_keeps_only_the_most_recently_used_others(tmp_path):
    now = 1_800_000_000.0
    mine = _file(tmp_path / "spark-cds-aaaa.jsa", 9e5, now)           # this key's: never removed
    old = [_file(tmp_path / f"spark-cds-o{i}.jsa", 1000.0 * (i + 1), now) for i in range(5)]
    other = _file(tmp_path / "tsqlparse-x", 9e5, now)                  # not an archive
    gone = spark._prune_archives(tmp_path, "aaaa", now=now)
    assert sorted(gone) == sorted(old[spark.KEEP_ARCHIVES:])
    assert all(p.exists() for p in [mine, other, *old[:spark.KEEP_ARCHIVES]])
    assert not any(p.exists() for p in old[spark.KEEP_ARCHIVES:])


def test_abandoned_parts_go_and_live_or_recent_ones_stay(tmp_path):
    now = 1_800_000_000.0
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout.strip()
        abandoned = _file(tmp_path / f"spark-cds-b.{dead}.part", 7200, now)
        live = _file(tmp_path / f"spark-cds-c.{child.pid}.part", 7200, now)
        recent = _file(tmp_path / f"spark-cds-d.{dead}.part", 60, now)
        mine = _file(tmp_path / f"spark-cds-aaaa.{dead}.part", 7200, now)  # its own key: _cds_options' job
        assert spark._prune_archives(tmp_path, "aaaa", now=now) == [abandoned]
        assert live.exists() and recent.exists() and mine.exists() and not abandoned.exists()
    finally:
        child.kill()
        child.wait()


def test_a_part_whose_writer_died_is_written_again_not_installed(tmp_path):
    """A job killed on a loaded machine left its JVM to archive only the classes loaded so far
    (14.6 MB against 185 MB): installing that part would cost every later JVM the rest."""
    env = cds.env(tmp_path)
    code = ("import json; from harness.analysis import spark; p = spark._archive(spark.LOCAL_JAVA_OPTS); "
            "print(json.dumps([p and str(p[2])]))")
    (final,) = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                         check=True).stdout)
    if final is None:
        pytest.skip("no Java")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    key = final.rsplit("spark-cds-", 1)[1].removesuffix(".jsa")
    orphan = _file(tmp_path / f"spark-cds-{key}.{dead}.part", 600, time.time())
    opts = cds.options(env)
    assert opts.startswith(f"-XX:ArchiveClassesAtExit={tmp_path}/spark-cds-{key}.") and str(orphan) not in opts
    assert not orphan.exists() and not os.path.exists(final)


@pytest.mark.untimed("an upper bound far beyond the 1 s limit: the busy child needs some CPU every 5 s")
def test_stopping_waits_for_a_jvm_that_works_however_long_and_not_for_one_that_hangs():
    """stop_session waits for the JVM writing the archive while it uses CPU (a loaded machine
    only slows it: a wall-clock limit once returned with the JVM still writing), gives up on
    one that uses none for the stall limit, and on one that spins past the overall limit: each
    given up on is killed, never left running after the command returned."""
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                             "while time.process_time() - t < 2.5: pass"], stdin=subprocess.PIPE)
    assert spark._wait_while_working(busy, stalled=5.0) and busy.returncode == 0
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE)
    try:
        started = time.monotonic()
        assert not spark._wait_while_working(hung, stalled=1.0)
        assert hung.poll() is not None and time.monotonic() - started < 60
    finally:
        hung.kill()
        hung.wait()
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.PIPE)
    try:
        started = time.monotonic()
        assert not spark._wait_while_working(spinning, stalled=30.0, limit=1.0)
        assert spinning.poll() is not None and time.monotonic() - started < 20
    finally:
        spinning.kill()
        spinning.wait()
