"""The Spark analysis (harness.analysis) on synthetic runs: aggregates checked against plain
Python (statistics module) computed from the same raw files, missing/corrupt files reported
by name, plots written as real PNGs and linked from index.html, labels, the CLI.

One SparkSession (local[2], the suite's spark fixture in tests/conftest.py) for the package's tests."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import psutil
import pytest

from support import synth

pytestmark = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="Spark needs Java 17+ (apt-get install openjdk-17-jre-headless)")

METRICS = {"send_rate": ("send_rate",), "receive_rate": ("receive_rate",),
           "send_p50_ms": ("send_latency_ms", "p50"), "send_p95_ms": ("send_latency_ms", "p95"),
           "send_p99_ms": ("send_latency_ms", "p99"), "e2e_p50_ms": ("e2e_latency_ms", "p50"),
           "e2e_p95_ms": ("e2e_latency_ms", "p95"), "e2e_p99_ms": ("e2e_latency_ms", "p99")}
# independent of harness.analysis.transforms on purpose
CATEGORY = {"PAGELATCH_EX": "page latch", "PAGELATCH_SH": "page latch", "WRITELOG": "log flush",
            "LOGBUFFER": "log flush", "LCK_M_X": "lock", "LCK_M_S": "lock", "LCK_M_SCH_S": "lock"}
PNG_SIG = b"\x89PNG\r\n\x1a\n"
THRESHOLD = 5.0


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """A small embedded run (1-2 initiators x 1/5/10/20 threads x 3 strategies, 3 reps) with:
    one samples.jsonl missing, one summary.json corrupt, two garbage lines in one samples file."""
    root = tmp_path_factory.mktemp("results")
    spec = synth.small_spec(name="t", payloads=(100,), repetitions=3, measure_seconds=6, warmup_seconds=2,
                            drain_seconds=1)
    run = synth.synthesize(root, spec, run_id="20261121-000000-t")
    faults = {
        "missing_samples": run / "i2-t20-trick150-p100-durable" / "rep-02" / "samples.jsonl",
        "corrupt_summary": run / "i1-t10-per_thread-p100-durable" / "rep-03" / "summary.json",
        "bad_lines": run / "i2-t5-shared-p100-durable" / "rep-01" / "samples.jsonl",
    }
    faults["missing_samples"].unlink()
    text = faults["corrupt_summary"].read_text()
    faults["corrupt_summary"].write_text(text[: len(text) // 2])
    lines = faults["bad_lines"].read_text().splitlines()
    lines.insert(5, "{this is not json")
    lines.insert(40, '{"ts": 1.0, "elapsed_s": "soon", "phase": "measure", "family": "waits", '
                     '"metric": "wait_ms_per_s", "key": "WRITELOG", "value": 1e9}')
    faults["bad_lines"].write_text("\n".join(lines) + "\n")
    # an in-progress repetition must be ignored
    partial = run / "i1-t1-per_thread-p100-durable" / ".rep-04.partial"
    partial.mkdir()
    (partial / "samples.jsonl").write_text("garbage\n")
    return run, faults


@pytest.fixture(scope="module")
def report(spark, faulty_run):
    """The report, its helper process drawing HELPER_PLOTS whatever the host's load (under the
    suite's load it would not start): every plot it was given came back drawn, none redrawn here."""
    from harness.analysis import job

    run, _ = faulty_run
    drawn: list = []
    start = job.start_plot_helper

    def helper():
        pool = start()
        assert pool is not None, "the plot helper did not start with a CPU said idle"
        submit = pool.submit
        pool.submit = lambda fn, *a: drawn.append((a[0] if a else fn.__name__, submit(fn, *a))) or drawn[-1][1]
        return pool

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(job, "idle_cpu", lambda: True)
        mp.setattr(job, "start_plot_helper", helper)
        index = job.analyze_result([run], spark=spark, threshold_pct=THRESHOLD).index
    names = [n for n, _ in drawn if n in job.HELPER_PLOTS]
    assert names and all(f.exception() is None and f.result() for n, f in drawn if n in job.HELPER_PLOTS), drawn
    return index


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One permutation, one repetition, one strategy (every axis has one value), mssql kind."""
    root = tmp_path_factory.mktemp("tiny")
    spec = synth.SynthSpec(name="tiny", initiators=(1,), threads=(8,), dialogs=("per_thread",), payloads=(100,),
                           servers=("sql2008",), repetitions=1, warmup_seconds=1, measure_seconds=4,
                           drain_seconds=1, target_kind="mssql")
    return synth.synthesize(root, spec, run_id="20261121-000001-tiny")


@pytest.fixture(scope="module")
def tiny_report(spark, tiny_run, tmp_path_factory):
    """A copy of the tiny run analysed into its ``report`` (the CLI's default, where the CLI test
    analyses it again): the copy, the index, the HTML and its images' first bytes then."""
    from harness.analysis.job import analyze_result

    run = tmp_path_factory.mktemp("tiny-report") / tiny_run.name
    shutil.copytree(tiny_run, run)
    index = analyze_result([run], out=run / "report", spark=spark).index
    html = index.read_text()
    images = {s: (index.parent / s).read_bytes()[:8] for s in re.findall(r"<img src='([^']+)'", html)}
    return run, index, html, images


# --------------------------------------------------------------------------- plain-Python reference

def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _f(v: str) -> float | None:
    return None if v in ("", None) else float(v)


def _load_reps(run: Path) -> dict[str, list[dict]]:
    """perm id -> the parseable rep summaries (corrupt ones skipped)."""
    out: dict[str, list[dict]] = defaultdict(list)
    from harness.errors import UserError
    from support.summaries import read

    for f in sorted(run.glob("*/rep-*/summary.json")):
        try:
            out[f.parent.parent.name].append(read(f))
        except UserError:
            pass
    return out


def _value(summary: dict, path: tuple[str, ...]) -> float:
    v = summary
    for k in path:
        v = v[k]
    return float(v)


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def _samples(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if all(isinstance(r.get(k), (int, float)) for k in ("ts", "elapsed_s", "value")):
            rows.append(r)
    return rows


def _python_waits(run: Path, reps: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
    """perm -> wait type -> mean over reps of (sum of measured wait_ms_per_s / measured ticks)."""
    out = {}
    for perm, summaries in reps.items():
        per_rep = []
        for s in summaries:
            f = run / perm / f"rep-{s['repetition']:02d}" / "samples.jsonl"
            if f.exists():
                meas = [r for r in _samples(f) if r["phase"] == "measure"]
                counts: dict[tuple, int] = defaultdict(int)
                for r in meas:
                    counts[(r["family"], r["metric"], r.get("key", ""))] += 1
                ticks = max(counts.values())
                w: dict[str, float] = defaultdict(float)
                for r in meas:
                    if r["family"] == "waits" and r["metric"] == "wait_ms_per_s":
                        w[r["key"]] += r["value"]
                per_rep.append({k: v / ticks for k, v in w.items()})
            else:
                ms = s["window"]["measure_seconds"]
                per_rep.append({t["wait_type"]: t["wait_time_ms"] / ms for t in s["top_waits"]})
        types = {k for d in per_rep for k in d}
        out[perm] = {k: sum(d.get(k, 0.0) for d in per_rep) / len(per_rep) for k in types}
    return out


def _close(a: float | None, b: float | None, rel: float = 1e-9, abs_: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


# --------------------------------------------------------------------------- aggregates

def test_permutation_aggregates_match_python(report, faulty_run):
    run, _ = faulty_run
    reps = _load_reps(run)
    table = {r["perm_id"]: r for r in _read_csv(report.parent / "tables" / "permutations.csv")}
    assert set(table) == set(reps)
    for perm, summaries in reps.items():
        row = table[perm]
        assert int(row["n"]) == len(summaries), perm
        for name, path in METRICS.items():
            xs = [_value(s, path) for s in summaries]
            q1, med, q3 = _quartiles(xs)
            assert _close(_f(row[f"{name}_median"]), statistics.median(xs)), (perm, name)
            assert _close(_f(row[f"{name}_median"]), med), (perm, name)
            assert _close(_f(row[f"{name}_q1"]), q1), (perm, name)
            assert _close(_f(row[f"{name}_q3"]), q3), (perm, name)
            assert _close(_f(row[f"{name}_iqr"]), q3 - q1, abs_=1e-6), (perm, name)
            assert _close(_f(row[f"{name}_min"]), min(xs)), (perm, name)
            assert _close(_f(row[f"{name}_max"]), max(xs)), (perm, name)
        assert _close(_f(row["max_xmitq_depth"]), max(float(s["max_xmitq_depth"]) for s in summaries))
        p = summaries[0]["permutation"]
        assert (int(row["initiators"]), int(row["threads"]), row["dialogs"], int(row["payload_bytes"])) == \
            (p["initiators"], p["threads"], p["dialogs"], p["payload_bytes"])


def test_measured_queue_depth_matches_python(report, faulty_run):
    run, _ = faulty_run
    table = {r["perm_id"]: r for r in _read_csv(report.parent / "tables" / "permutations.csv")}
    for perm_dir in sorted(p for p in run.iterdir() if p.is_dir() and p.name.startswith("i")):
        values = [r["value"] for f in perm_dir.glob("rep-*/samples.jsonl") for r in _samples(f)
                  if r["phase"] == "measure" and r["family"] == "queues" and r["key"].startswith("xmitq")]
        assert _close(_f(table[perm_dir.name]["xmitq_depth_max_measured"]), max(values)), perm_dir.name


def test_wait_profile_shares_and_diagnosis_match_python(report, faulty_run):
    from harness.analysis.diagnosis import diagnose_run

    run, _ = faulty_run
    reps = _load_reps(run)
    expected = _python_waits(run, reps)
    profile = defaultdict(dict)
    for r in _read_csv(report.parent / "tables" / "wait_profile.csv"):
        profile[r["perm_id"]][r["wait_type"]] = r
    perms = {r["perm_id"]: r for r in _read_csv(report.parent / "tables" / "permutations.csv")}
    top = defaultdict(list)
    for r in _read_csv(report.parent / "tables" / "top_waits.csv"):
        top[r["perm_id"]].append(r)
    for perm, waits in expected.items():
        assert set(profile[perm]) == set(waits), perm
        real = waits   # idle waits are left out by the targets (and by the synthetic runs)
        total = sum(real.values())
        for k, v in waits.items():
            row = profile[perm][k]
            assert _close(_f(row["wait_ms_per_s"]), v, rel=1e-9, abs_=1e-6), (perm, k)
            assert _close(_f(row["share"]), v / total, rel=1e-9, abs_=1e-9), (perm, k)
        ranked = sorted(real, key=lambda k: (-real[k], k))[:5]
        assert [r["wait_type"] for r in sorted(top[perm], key=lambda r: int(r["rank"]))] == ranked, perm
        shares = defaultdict(float)
        for k, v in real.items():
            shares[CATEGORY.get(k, "other")] += v / total
        assert _close(_f(perms[perm]["page_latch_share"]), shares.get("page latch", 0.0), abs_=1e-9)
    # what limits throughput: the job's tables are the diagnosis of the summaries it accepted (the
    # corrupt one left out), computed in plain Python here
    diags = {d.perm_id: d for d in diagnose_run(run)}
    table = {r["perm_id"]: r for r in _read_csv(report.parent / "tables" / "diagnosis.csv")}
    assert set(table) == set(diags) == set(perms)
    for perm, d in diags.items():
        assert perms[perm]["limit"] == d.limit and perms[perm]["limit_confidence"] == d.confidence, perm
        assert (table[perm]["stage"], table[perm]["evidence"], int(table[perm]["reps"])) == (d.stage, d.evidence, d.reps)
        assert table[perm]["technique"] == (d.remedy.technique if d.remedy else ""), perm
    assert diags["i1-t10-per_thread-p100-durable"].reps == 2      # its rep 3's summary is corrupt
    # the model's story: page latches without the 150 trick, the shared dialog's lock, the client
    assert perms["i2-t20-per_thread-p100-durable"]["limit"] == "SEND: page latch"
    assert perms["i2-t20-trick150-p100-durable"]["limit_stage"] == "SEND"
    assert "page latch" not in perms["i2-t20-trick150-p100-durable"]["limit"]
    assert perms["i2-t20-shared-p100-durable"]["limit"] == "SEND: row lock of the shared dialog"
    assert perms["i1-t1-trick150-p100-durable"]["limit_stage"] == "client"
    moves = _read_csv(report.parent / "tables" / "limit_moves.csv")
    assert any(m["context"] == "i2 per_thread p100 durable" and m["moves"].startswith("2: client")
               and m["moves"].endswith("40: SEND (page latch)") for m in moves), moves
    html = report.read_text()
    assert "What limits throughput, and what to try" in html and "one dialog per thread (many conversations)" in html


def _scipy_gain_ci(t: list[float], b: list[float]) -> tuple[float, float] | None:
    """The reference: scipy's Welch t interval of the difference of the mean log rates, read in
    percent (a run with fixed repetitions looks once): at 95 % for a gain or a loss, else at
    90 % when that one decides no difference (an equivalence test at 5 %), else the 95 % one."""
    import numpy as np
    from scipy import stats

    if len(t) < 3 or len(b) < 3:
        return None
    test = stats.ttest_ind(np.log(t), np.log(b), equal_var=False)
    wide = tuple(100 * math.expm1(x) for x in test.confidence_interval(0.95))
    if _verdict(wide) in ("gain", "loss"):
        return wide
    narrow = tuple(100 * math.expm1(x) for x in test.confidence_interval(0.90))
    return narrow if _verdict(narrow) == "no difference" else wide


def _gain(t: list[float], b: list[float]) -> float:
    """The ratio of the geometric means, in percent."""
    return 100 * math.expm1(statistics.fmean(map(math.log, t)) - statistics.fmean(map(math.log, b)))


def _verdict(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "inconclusive"
    lo, hi = ci
    if lo > THRESHOLD:
        return "gain"
    if hi < -THRESHOLD:
        return "loss"
    if -THRESHOLD <= lo and hi <= THRESHOLD:
        return "no difference"
    return "inconclusive"


def test_gains_and_crossover_match_python(report, faulty_run):
    run, _ = faulty_run
    reps = _load_reps(run)
    values = {p: [s["receive_rate"] for s in sorted(ss, key=lambda s: s["repetition"])] for p, ss in reps.items()}
    gains = _read_csv(report.parent / "tables" / "dialog_gains.csv")
    assert {g["strategy"] for g in gains} == {"trick150", "shared"}
    by_group = defaultdict(list)
    for g in gains:
        i, t, s = int(g["initiators"]), int(g["threads"]), g["strategy"]
        bp, op = f"i{i}-t{t}-per_thread-p100-durable", f"i{i}-t{t}-{s}-p100-durable"
        assert _close(_f(g["gain_pct"]), _gain(values[op], values[bp]), rel=1e-9), g
        assert int(g["total_threads"]) == i * t
        assert (int(g["n"]), int(g["baseline_n"])) == (len(values[op]), len(values[bp]))
        ci = _scipy_gain_ci(values[op], values[bp])
        if ci is None:
            assert g["gain_ci_low_pct"] == g["gain_ci_high_pct"] == "", g
        else:
            assert _close(_f(g["gain_ci_low_pct"]), ci[0], rel=1e-9) and _close(_f(g["gain_ci_high_pct"]), ci[1],
                                                                                 rel=1e-9), g
        assert g["verdict"] == _verdict(ci), g
        by_group[(s, i)].append((i * t, _gain(values[op], values[bp]), g["verdict"]))
    assert len(gains) == 2 * 2 * 4
    # i1-t10-per_thread lost a repetition to its corrupt summary: 2 left, so inconclusive
    assert {g["verdict"] for g in gains if g["baseline_perm_id"] == "i1-t10-per_thread-p100-durable"} == {"inconclusive"}
    cross = {(c["strategy"], int(c["initiators"])): c for c in _read_csv(report.parent / "tables" / "crossover.csv")}
    for key, pts in by_group.items():
        pts.sort()
        expected = None
        for k in range(len(pts)):
            if all(v == "gain" for _, _, v in pts[k:]):
                expected = pts[k][0]
                break
        got = cross[key]["crossover_total_threads"]
        assert (None if got == "" else int(got)) == expected, (key, pts)
        assert cross[key]["verdict"] == pts[-1][2], key
        assert _close(_f(cross[key]["max_gain_pct"]), max(g for _, g, _ in pts)), key
    # the model's shape: the trick pays at high thread counts, a shared dialog never does
    assert cross[("trick150", 2)]["crossover_total_threads"] not in ("", None)
    assert cross[("trick150", 2)]["verdict"] == "gain"
    assert float(cross[("trick150", 2)]["gain_at_max_threads_pct"]) > 50
    assert cross[("shared", 2)]["crossover_total_threads"] == ""
    assert cross[("shared", 2)]["verdict"] == "loss"


def test_parquet_tables_carry_intervals_and_verdicts(spark, report):
    tables = report.parent / "tables"
    gains = spark.read.parquet(str(tables / "dialog_gains.parquet"))
    assert {"gain_pct", "gain_ci_low_pct", "gain_ci_high_pct", "verdict", "synthetic"} <= set(gains.columns)
    assert {r.verdict for r in gains.select("verdict").distinct().collect()} <= \
        {"gain", "loss", "no difference", "inconclusive"}
    assert gains.count() == len(_read_csv(tables / "dialog_gains.csv"))
    cross = spark.read.parquet(str(tables / "crossover.parquet"))
    assert {"verdict", "crossover_total_threads", "gain_at_max_threads_ci_low_pct"} <= set(cross.columns)
    perms = spark.read.parquet(str(tables / "permutations.parquet"))
    assert {"receive_rate_ci_low", "receive_rate_ci_high", "receive_rate_values", "synthetic"} <= set(perms.columns)
    assert perms.where("synthetic").count() == perms.count()  # every row of a synthetic run says so


# --------------------------------------------------------------------------- robustness

def test_missing_and_corrupt_files_reported_by_name(report, faulty_run):
    run, faults = faulty_run
    issues = _read_csv(report.parent / "tables" / "issues.csv")
    text = {i["path"]: i["problem"] for i in issues}
    assert "missing" in text[str(faults["missing_samples"])]
    assert "damaged" in text[str(faults["corrupt_summary"])]
    assert text[str(faults["bad_lines"])].startswith("2 corrupt")
    assert not any(".partial" in p for p in text)
    html = (report.parent / "index.html").read_text()
    for f in faults.values():
        assert str(f) in html
    perms = {r["perm_id"]: r for r in _read_csv(report.parent / "tables" / "permutations.csv")}
    assert perms["i1-t10-per_thread-p100-durable"]["n"] == "2"        # corrupt summary skipped
    assert perms["i2-t20-trick150-p100-durable"]["n"] == "3"          # summary still counts
    assert perms["i2-t20-trick150-p100-durable"]["sample_reps"] == "2"
    sources = {r["source"] for r in _read_csv(report.parent / "tables" / "wait_profile.csv")
               if r["perm_id"] == "i2-t20-trick150-p100-durable"}
    assert sources == {"samples", "samples,summary"}  # rep 2's waits come from its summary's top_waits


def test_unknown_or_empty_dir_is_a_user_error(spark, tmp_path):
    from harness.analysis.job import analyze_result
    from harness.errors import UserError

    with pytest.raises(UserError, match="not a run directory"):
        analyze_result([tmp_path / "nope"], spark=spark)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no complete repetition"):
        analyze_result([tmp_path / "empty"], spark=spark)


# --------------------------------------------------------------------------- plots and HTML

def _png_info(path: Path) -> tuple[int, int, dict[str, str]]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIG, path
    width, height = struct.unpack(">II", data[16:24])
    text, pos = {}, 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8: pos + 8 + length]
        if kind == b"tEXt":
            k, _, v = chunk.partition(b"\0")
            text[k.decode("latin-1")] = v.decode("latin-1")
        elif kind == b"iTXt":
            k, _, rest = chunk.partition(b"\0")
            v = rest[2:].split(b"\0", 2)[-1]
            text[k.decode("latin-1")] = v.decode("utf-8")
        elif kind == b"zTXt":
            k, _, rest = chunk.partition(b"\0")
            text[k.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        pos += 12 + length
    return width, height, text


def test_plots_are_pngs_referenced_by_index(report):
    html = (report.parent / "index.html").read_text()
    srcs = re.findall(r"<img src='([^']+)'", html)
    assert len(srcs) >= 8
    kinds = {Path(s).name.split("-")[0] for s in srcs}
    assert {"throughput", "gain", "waits", "queues", "send_vs_receive", "latency"} <= kinds
    assert sum(1 for s in srcs if Path(s).name.startswith("gain-")) == 2  # 150 trick and shared
    for src in srcs:
        assert not src.startswith("/") and "://" not in src  # relative links
        png = report.parent / src
        assert png.stat().st_size > 10_000, src
        w, h, text = _png_info(png)
        assert w >= 600 and h >= 300, (src, w, h)
        desc = text.get("Description", "")
        assert "20261121-000000-t" in desc and "PostgreSQL emulation" in desc, (src, text)
        assert "SYNTHETIC" in desc, (src, text)
        assert "SQL Server" not in desc and "SQL Server" not in text.get("Title", "")
    assert sorted(p.name for p in (report.parent / "plots").glob("*.png")) == sorted(Path(s).name for s in srcs)
    # a closed-loop run without a drain: neither open-loop nor backlog section, no empty figure
    # (runs with them: test_open_loop_backlog_report.py)
    assert "Open loop" not in html and "Backlog drain" not in html
    assert not [s for s in srcs if "open_loop" in s or "backlog" in s]
    # the key table and the labels
    assert "Key results" in html and "pays from" in html
    assert "PostgreSQL emulation" in html and "SQL Server" not in html
    # synthetic data is labelled as such; the embedded target's caveats are stated
    assert html.count("SYNTHETIC") >= 3 and "Nothing in it was measured" in html
    assert "mapped from PostgreSQL wait events" in html and "docs/targets.md" in html
    assert "does not exist on PostgreSQL" in html
    assert "v-gain" in html and "inconclusive" in html
    assert "<style>" in html and "<script" not in html
    for t in ("permutations", "dialog_gains", "crossover", "top_waits", "wait_profile", "repetitions"):
        assert (report.parent / "tables" / f"{t}.csv").is_file(), t
        assert (report.parent / "tables" / f"{t}.parquet").is_file(), t


def test_single_value_axes_and_absent_strategies(tiny_report):
    run, index, html, images = tiny_report
    assert index.parent == (run / "report").resolve()
    assert "skipped: the run has no 150 trick" in html
    assert "skipped: the run has no one shared dialog" in html
    assert "SQL Server 16.0" in html  # a real SQL Server target is named as such
    assert any("throughput" in s for s in images) and any("latency" in s for s in images)
    assert set(images.values()) == {PNG_SIG}
    # analyzing again replaces the previous report: the CLI test's analysis of this copy


def test_wait_categories():
    from harness.analysis.tables import category

    expected = {  # wait type: category
        "PAGELATCH_EX": "page latch", "PAGELATCH_UP": "page latch", "WRITELOG": "log flush",
        "LOGBUFFER": "log flush", "LCK_M_X": "lock", "LCK_M_SCH_S": "lock", "ASYNC_NETWORK_IO": "client",
        "PAGEIOLATCH_SH": "io", "SOS_SCHEDULER_YIELD": "cpu", "LATCH_EX": "other", "WAITFOR": "other",
        "LWLock:BufferContent": "page latch", "IO:WalSync": "log flush", "Lock:transactionid": "lock",
    }
    assert {w: category(w) for w in expected} == expected


def test_target_text_never_says_sql_server_for_an_emulation():
    from harness.analysis.plots import target_text

    assert target_text("SYNTHETIC data: PostgreSQL 18.6 emulation of Service Broker",
                       emulation="PostgreSQL").startswith("SYNTHETIC data (not measured)")
    assert target_text("SQL Server 16.0", synthetic=True).startswith("SYNTHETIC")

    assert "PostgreSQL emulation" in target_text("PostgreSQL 18.6 emulation of Service Broker", emulation="PostgreSQL")
    assert target_text("emulation of SQL Server Service Broker", emulation="PostgreSQL") == \
        "PostgreSQL emulation of Service Broker"
    assert target_text(None, emulation="PostgreSQL") == "PostgreSQL emulation of Service Broker"
    assert target_text("SQL Server 16.0") == "SQL Server 16.0"
    assert target_text(None, kind="memory") == "target kind memory"


# --------------------------------------------------------------------------- CLI

def test_cli_analyze_prints_the_diagnosis_and_the_issues_on_stderr(spark, tiny_report, capsys):
    """Without -q: what limits throughput on stderr (with Spark's log), and the issues, each
    damaged file named (a second repetition whose summary.json was cut in half, as a full disk
    or a crash would leave it); stdout stays the path and the key table. (With -q, stdout is the
    same and stderr empty: tests/analysis/test_analysis_cluster.py, a fresh process.) The run has
    no run.json: the target is taken from the summaries, and the report goes in the run, where
    it replaces the one tiny_report wrote there."""
    from harness.cli import main

    run, index, before, _images = tiny_report
    assert index == (run / "report" / "index.html").resolve() and str(run / "run.json") not in before
    (run / "run.json").unlink()
    [rep] = list(run.glob("*/rep-01"))
    damaged = rep.parent / "rep-02" / "summary.json"
    shutil.copytree(rep, damaged.parent)
    text = damaged.read_text()
    damaged.write_text(text[: len(text) // 2])
    assert main(["analyze", str(run)]) == 0
    cap = capsys.readouterr()
    out = cap.out.strip().splitlines()
    assert out[0] == str((run / "report" / "index.html").resolve())
    assert out[-1] == "Key results: no comparison (no permutation has a baseline with everything else equal)"
    assert "What limits throughput" not in cap.out
    assert "What limits throughput, and what to try (docs/diagnosis.md)" in cap.err
    assert "i1-t8-per_thread-p100" in cap.err.split("What limits throughput")[1]
    assert "2 issue(s)" in cap.err and f"warning: {damaged}: damaged" in cap.err, cap.err[-3000:]
    assert f"warning: {run / 'run.json'}: missing" in cap.err, cap.err[-3000:]
    html = (run / "report" / "index.html").read_text()     # the new report, where the previous one was
    assert "SQL Server 16.0" in html and str(run / "run.json") in html and str(damaged) in html


@pytest.mark.spark
def test_a_sigterm_stops_an_analysis_as_ctrl_c_does(tiny_run, tmp_path):
    """kill (systemd, a CI timeout) during ``ssbench analyze`` as its gateway JVM starts: a
    SIGTERM to the command alone stops it as Ctrl-C does (exit 130, "interrupted"), no process
    it started is left and no report half-written. Before, the signal killed the command and
    left its JVM running; and interrupted there (Ctrl-C too), PySpark left its gateway JVM
    running for good."""
    from support import machine

    out, err = tmp_path / "report", tmp_path / "stderr"
    with open(err, "w") as f:     # a file, not a pipe: a JVM left behind would hold a pipe open
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "analyze", str(tiny_run), "--out", str(out),
                                 "-q"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=f)
    group = proc.pid              # the command's process group: everything it started is in it

    def left() -> list[psutil.Process]:
        return [p for p in psutil.process_iter() if p.pid != group and _in_group(p, group)]

    try:
        for _ in range(int(machine.allowance(120) / 0.05)):
            if any(_submitted(p) for p in left()) or proc.poll() is not None:   # the JVM has begun
                break
            time.sleep(0.05)
        assert proc.poll() is None, err.read_text()[-2000:]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=machine.allowance(60))
        _, alive = psutil.wait_procs(left(), timeout=machine.allowance(15))
    finally:
        subprocess.run(["pkill", "-KILL", "-g", str(group)])
    assert proc.returncode == 130 and "ssbench: interrupted" in err.read_text(), (proc.returncode, err.read_text())
    assert not alive, [(p.pid, p.cmdline()[:3]) for p in alive]
    assert not (out / "index.html").exists()


def _submitted(p) -> bool:
    """The gateway JVM (spark-submit's), not the launcher JVM that builds its command line."""
    try:
        return p.name() == "java" and "org.apache.spark.deploy.SparkSubmit" in p.cmdline()
    except psutil.Error:
        return False


def _in_group(p, group: int) -> bool:
    try:
        return os.getpgid(p.pid) == group
    except OSError:
        return False


def test_cli_without_java_says_how_to_get_it(tiny_run, monkeypatch, capsys):
    from harness.cli import main

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["analyze", str(tiny_run)]) == 2
    err = capsys.readouterr().err
    assert "Java" in err and "openjdk-17" in err


def test_help_does_not_import_pyspark():
    code = ("import sys, contextlib, io\nfrom harness.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main(['--help'])\n    except SystemExit: pass\n"
            "assert 'pyspark' not in sys.modules and 'matplotlib' not in sys.modules, sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_alternated_members_wait_profile_is_its_sessions_in_its_slices(tmp_path):
    """make bench's strategies share each window, and with it the server's waits; the wait
    profile of each takes the sessions sampled in its own slices (source 'sessions'), so the
    shared dialog's lock queue and per_thread's log flush read apart. A run without samples of
    its sessions keeps the server's waits."""
    import json

    from harness.analysis import discovery
    from harness.analysis import tables as T

    spec = synth.SynthSpec(name="alt", initiators=(1,), threads=(8,), dialogs=("per_thread", "shared"),
                           payloads=(100,), servers=("durable",), repetitions=2, warmup_seconds=1,
                           measure_seconds=2, drain_seconds=1)
    run = synth.synthesize(tmp_path, spec, run_id="20261128-000001-alt")
    members = sorted(p.name for p in run.iterdir() if p.is_dir() and p.name.startswith("i1-"))
    for f in run.glob("i1-*/rep-0*/summary.json"):
        doc = json.loads(f.read_text())
        perm = f.parent.parent.name
        waits = doc.setdefault("waits", {})
        waits["top_waits"] = [{"wait_type": "WRITELOG", "wait_time_ms": 9000.0, "waiting_tasks": 90, "share": 1.0}]
        doc["window"].update(measure_start=100.0, measure_end=104.0, span_seconds=4.0)
        if f.parent.name == "rep-01":     # rep 2: an older summary, without session_waits or alternation
            doc["alternation"] = {"members": members, "slice_seconds": 0.5, "member": members.index(perm)}
            waits["session_waits"] = ({"sender": {"LCK_M_X": 6.1, "WRITELOG": 0.5}, "reader": {"WRITELOG": 0.25}}
                                      if "shared" in perm else {"sender": {"WRITELOG": 5.0}, "reader": {"WRITELOG": 0.25}})
            waits["session_wait_samples"] = 20
        f.write_text(json.dumps(doc))
    for f in run.glob("i1-*/rep-0*/samples.jsonl"):
        f.write_text("")                   # no per-tick waits: the summaries' are the server's
    reps = discovery.read_summaries(discovery.discover([run]))
    got = {(r["perm_id"].split("-")[2], r["rep"], r["wait_type"]): (r["wait_ms_per_s"], r["source"])
           for r in T.rep_wait_rates(reps, [])}
    assert got == {
        ("shared", 1, "LCK_M_X"): (6100.0, "sessions"), ("shared", 1, "WRITELOG"): (750.0, "sessions"),
        ("per_thread", 1, "WRITELOG"): (5250.0, "sessions"),
        ("shared", 2, "WRITELOG"): (2250.0, "summary"), ("per_thread", 2, "WRITELOG"): (2250.0, "summary")}
