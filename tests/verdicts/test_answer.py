"""harness.verdicts.answer: the key table (rows, "pays from", why each inconclusive comparison
stayed so), its text and JSON, and sections other parts append."""

from __future__ import annotations

import io
import json
from pathlib import Path

from harness.verdicts import Column, Rule, Section, judge_all, key_answer, read_answer
from harness.verdicts.answer import ANSWER_SCHEMA, KEY, run_answer

REPO = Path(__file__).resolve().parents[2]


def row(pid, dialogs, threads, values, statuses=None):
    return {"run_id": "r", "perm_id": pid, "server": "durable", "initiators": 1, "threads": threads,
            "total_threads": threads, "dialogs": dialogs, "payload_bytes": 100,
            "rep_numbers": list(range(1, len(values) + 1)), "rep_statuses": statuses or ["ok"] * len(values),
            "receive_rate_values": [float(v) for v in values]}


def judged(rule=Rule(threshold_pct=5.0, min_reps=3, max_reps=5)):
    rows = [row("p1", "per_thread", 1, [100, 101, 99]), row("t1", "trick150", 1, [100, 130, 80]),
            row("p8", "per_thread", 8, [100, 101, 99]), row("t8", "trick150", 8, [150, 152, 149]),
            row("p32", "per_thread", 32, [100, 101, 99]), row("t32", "trick150", 32, [200, 203, 199]),
            row("s32", "shared", 32, [20, 21, 19, 50], ["ok", "ok", "ok", "noisy_host"])]
    return judge_all(rows, default=rule)


def test_one_row_per_comparison_with_its_answer(noisy_kept_out):
    auto = {"rounds": 5, "stopped": "budget", "budget_seconds": 480.0}
    answer = key_answer(judged(), ["r"], {"r": auto})
    key = answer.section(KEY)
    got = [(r["comparison"], r["total_threads"], r["verdict"], r["pays_from"], r["reps_text"]) for r in key.rows]
    assert got == [("trick150", 1, "inconclusive", 8, "3/3"), ("trick150", 8, "gain", 8, "3/3"),
                   ("trick150", 32, "gain", 8, "3/3"), ("shared", 32, "loss", None, "3/3")]
    t8 = key.rows[1]
    assert t8["gain_text"].startswith("+50.") and t8["confidence"] == Rule(max_reps=5).confidence_at(3)
    assert key.rows[3]["kept_out"] == 1 and key.title == "Key results: 3 of 4 comparisons decided"
    (why,) = [n for n in key.notes if n.startswith("inconclusive")]
    assert why.startswith("inconclusive: trick150 vs per_thread at 1 thread: the interval [")
    assert "straddles a threshold" in why and "the time budget (8 min) left no room for round 6" in why


def test_text_and_json(noisy_kept_out):
    answer = key_answer(judged(), ["r"], report="/x/index.html")
    out = io.StringIO()
    answer.render(out)
    lines = out.getvalue().splitlines()
    assert lines[1] == "Key results: 3 of 4 comparisons decided"
    header = lines[2].split()
    assert header[:3] == ["server", "comparison", "initiators"] and "pays" in header and header[-1] == "reps"
    assert any("trick150 vs per_thread" in line and "gain" in line for line in lines)
    doc = json.loads(json.dumps(answer.to_json()))
    assert doc["schema"] == ANSWER_SCHEMA and doc["report"] == "/x/index.html"
    assert doc["sections"][0]["rows"][1]["verdict"] == "gain"


def test_other_parts_append_sections_and_the_answer_is_read_back(tmp_path, noisy_kept_out):
    answer = key_answer(judged(), ["r"])
    answer.add(Section("diagnosis", "What limits throughput", [Column("perm_id", "permutation"),
                                                               Column("limit", "limit")],
                       [{"perm_id": "t32", "limit": "log flush"}], ["from the wait profile"]))
    (tmp_path / "answer.json").write_text(json.dumps(answer.to_json()))
    back = read_answer(tmp_path / "index.html")
    assert back is not None and back.to_json() == answer.to_json()
    out = io.StringIO()
    back.render(out)
    text = out.getvalue()
    assert text.index("Key results") < text.index("What limits throughput") and "log flush" in text
    assert read_answer(tmp_path / "nothing") is None


def test_a_run_directory_answers_without_spark():
    """One repetition a side (the gate's test run): inconclusive, and it says why."""
    answer = run_answer(REPO / "tests" / "gate" / "data" / "run-2aae5f3")
    (r,) = answer.section(KEY).rows
    assert r["verdict"] == "inconclusive" and r["reps_text"] == "1/1"
    assert "fewer than 3 repetitions on a side (1 and 1 counted)" in r["reason"]
    assert "fixed number of repetitions" in r["reason"]


def test_a_host_whose_cpu_speed_moved_is_named_under_an_inconclusive_table(noisy_kept_out):
    """The run's record of its host's CPU speed (harness.results.host_cpu_speed) adds a note when
    a comparison stayed inconclusive and the speed spread beyond HOST_NOTE_SD_PCT; not otherwise."""
    from harness.results import host_cpu_speed
    from harness.verdicts.answer import HOST_NOTE_SD_PCT, host_note

    speeds = [0.77, 1.31, 1.0, 0.95, 1.1]
    h = host_cpu_speed([{"cpu_speed": v} for v in speeds] + [{"cpu_speed": None}])
    assert h == {"windows": 5, "min": 0.77, "max": 1.31, "sd_pct": 21.6}
    assert host_cpu_speed([{"cpu_speed": 1.0}]) is None
    note = host_note({"host_cpu_speed": h})
    assert note.startswith("host: its CPU's own speed moved across the run's 5 windows, from 0.77 to 1.31 of "
                           "its typical (s.d. 22 %, cpu probe;") and "not corrected" in note
    quiet = host_cpu_speed([{"cpu_speed": v} for v in (0.98, 1.0, 1.02)])
    assert quiet["sd_pct"] <= HOST_NOTE_SD_PCT and host_note({"host_cpu_speed": quiet}) is None
    key = key_answer(judged(), ["r"], {"r": {"host_cpu_speed": h}}).section(KEY)
    assert key.notes[-2] == note and key.notes[-1].startswith("rates:")
    decided = judge_all([row("p8", "per_thread", 8, [100, 101, 99]), row("t8", "trick150", 8, [150, 152, 149])],
                        default=Rule(threshold_pct=5.0, min_reps=3, max_reps=5))
    assert note not in key_answer(decided, ["r"], {"r": {"host_cpu_speed": h}}).section(KEY).notes


def test_the_key_table_says_which_comparisons_were_judged_paired():
    """A comparison whose sides shared their windows (an alternated run) reads "n/n paired" in
    the reps column and has "paired": true; one judged with Welch reads "n/n"."""
    from harness.verdicts.answer import key_row
    from harness.verdicts.pairs import Judged
    from harness.verdicts.rule import Rule, judge

    rule = Rule()
    t = [(r, v) for r, v in enumerate((100.0, 102.0, 99.0, 101.0), 1)]
    b = [(r, v) for r, v in enumerate((80.0, 81.0, 79.5, 80.5), 1)]
    paired, welch = judge(t, b, rule, paired=True), judge(t, b, rule)
    assert paired.paired and not welch.paired and paired.verdict == welch.verdict == "gain"

    class P:   # the pairing's fields key_row reads
        family, label, baseline_value, context, axis = "strategy", "trick150", "per_thread", "", "dialogs"
        treatment = {"run_id": "r", "threads": 8, "total_threads": 8}
        baseline = {"run_id": "r"}
        metric = type("M", (), {"name": "receive_rate", "text": "receive rate", "higher_is_better": True})()

    rows = [key_row(Judged(P, o, rule)) for o in (paired, welch)]
    assert [(r["reps_text"], r["paired"]) for r in rows] == [("4/4 paired", True), ("4/4", False)]


def test_the_hosts_cross_cpu_latency_is_the_key_tables_last_note_whatever_the_verdicts():
    """The run's record of its cross-CPU latency (harness.results.host_cross_cpu: an alternated
    window's members counted once) is said under the key table, decided or not: a figure."""
    from harness.results import host_cross_cpu
    from harness.verdicts.answer import cross_cpu_note

    def summary(start, ns):
        return {"cross_cpu_ns": ns, "measure_start": start}      # a flat row (a summary reads alike)

    h = host_cross_cpu([summary(1.0, 201.4), summary(1.0, 201.4), summary(2.0, 368.1), summary(3.0, None)])
    assert h == {"windows": 2, "min_ns": 201.4, "max_ns": 368.1}
    assert host_cross_cpu([summary(1.0, 201.4), summary(1.0, 201.4)]) is None
    note = cross_cpu_note({"host_cross_cpu": h})
    assert note.startswith("host: a cache line's round trip between two of its CPUs took 201 to 368 ns across "
                           "the run's 2 windows")
    assert cross_cpu_note({}) is None and cross_cpu_note(None) is None
    decided = judge_all([row("p8", "per_thread", 8, [100, 101, 99]), row("t8", "trick150", 8, [150, 152, 149])],
                        default=Rule(threshold_pct=5.0, min_reps=3, max_reps=5))
    assert key_answer(decided, ["r"], {"r": {"host_cross_cpu": h}}).section(KEY).notes[-1] == note
    assert key_answer(judged(), ["r"], {"r": {"host_cross_cpu": h}}).section(KEY).notes[-1] == note
    assert not any("cache line" in n for n in key_answer(decided, ["r"], {"r": {}}).section(KEY).notes)


def test_the_permutations_spread_is_said_under_the_key_table_before_the_cross_cpu_note():
    """rate_spread: per compared permutation (each counted once), max/min of the receive rates
    of the repetitions that count in verdicts (a noisy_storage one is left out; a permutation
    with one such repetition has no spread); the key table says the narrowest and the widest,
    names the widest, decided or not, and says nothing without a spread."""
    from harness.verdicts.answer import rate_spread, spread_note

    rows = [row("p8", "per_thread", 8, [100, 110, 50], ["ok", "ok", "noisy_storage"]),
            row("t8", "trick150", 8, [200, 250, 240]), row("s8", "shared", 8, [30, 33, 31]),
            row("p32", "per_thread", 32, [300, 300, 300]), row("t32", "trick150", 32, [10, 11, 9]),
            row("s32", "shared", 32, [5, 90, 90], ["ok", "noisy_storage", "server_frozen"])]
    decided = judge_all(rows, default=Rule(threshold_pct=5.0, min_reps=3, max_reps=5))
    s = rate_spread(decided)
    assert s == {"permutations": 5, "min": 1.0, "max": 1.25, "widest": "t8"}
    note = spread_note(s)
    assert note.startswith("rates: each permutation's repetitions spread by 1.00 to 1.25 (max/min receive rate, "
                           "5 permutations; the widest t8)")
    assert spread_note(None) is None and rate_spread([]) is None
    two_runs = judge_all(rows + [{**rows[0], "run_id": "r2", "receive_rate_values": [100.0, 100.0, 200.0],
                                  "rep_statuses": ["ok"] * 3},
                                 {**rows[1], "run_id": "r2", "receive_rate_values": [100.0, 100.0, 150.0]}],
                         default=Rule(threshold_pct=5.0, min_reps=3, max_reps=5))
    assert rate_spread(two_runs) == {"permutations": 7, "min": 1.0, "max": 2.0, "widest": "r2/p8"}
    h = {"windows": 2, "min_ns": 201.4, "max_ns": 368.1}
    notes = key_answer(decided, ["r"], {"r": {"host_cross_cpu": h}}).section(KEY).notes
    assert notes[-2] == note and notes[-1].startswith("host: a cache line's round trip")
    assert key_answer(decided, ["r"]).section(KEY).notes[-1] == note
    one = judge_all([row("p8", "per_thread", 8, [100, 101, 140], ["ok", "noisy_storage", "noisy_storage"]),
                     row("t8", "trick150", 8, [150, 90, 160], ["ok", "server_frozen", "noisy_storage"])],
                    default=Rule(threshold_pct=5.0, min_reps=3, max_reps=5))
    assert not any(n.startswith("rates:") for n in key_answer(one, ["r"]).section(KEY).notes)
