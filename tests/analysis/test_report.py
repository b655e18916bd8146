"""The report's notes about the targets (harness.analysis.report.about_targets), from run.json
sections as the targets write them. Fast: no Spark."""

from __future__ import annotations

from pathlib import Path

from harness.analysis.discovery import Discovery, FoundRun
from harness.analysis.report import about_targets, verdict_words

EMBEDDED = {"kind": "embedded", "label": "PostgreSQL 18.6 emulation of Service Broker",
            "notes": ["Wait types are mapped from PostgreSQL wait events (wait_mapping; docs/embedded.md).",
                      "The page-latch contention that the 150 trick relieves on SQL Server does not exist on "
                      "PostgreSQL: expect no gain from it here."],
            "wait_mapping": [{"pg_wait_type": "IO", "pg_wait_event": "WalSync", "wait_type": "WRITELOG"},
                             {"pg_wait_type": "LWLock", "pg_wait_event": None, "wait_type": "LATCH_EX"},
                             {"pg_wait_type": "Activity", "pg_wait_event": None, "wait_type": "PG_IDLE_BACKGROUND",
                              "benign": True}]}


def _disc(target: dict, run_id: str = "r1") -> Discovery:
    run = FoundRun(run_id=run_id, path=Path("/nonexistent") / run_id, meta={"target": target})
    return Discovery(runs=[run], reps=[])


def test_embedded_notes_and_the_runs_own_mapping():
    html = about_targets(_disc(EMBEDDED), {"r1": "PostgreSQL emulation"}, set())
    assert EMBEDDED["notes"][1].split(":")[0] in html
    assert html.count("mapped from PostgreSQL wait events") == 1   # the target's note, said once, with the mapping
    assert "IO:WalSync" in html and "WRITELOG" in html and "LWLock:(any other)" in html
    assert "PG_IDLE_BACKGROUND (idle, left out)" in html
    assert html.count("page-latch contention") == 1   # the target's own note, not repeated
    assert "SYNTHETIC" not in html


#: run.json's target section as the embedded target writes it (harness/targets/embedded/target.py)
EMBEDDED_AS_WRITTEN = {
    "kind": "embedded", "label": "PostgreSQL 18.6 emulation of Service Broker",
    "note": "PostgreSQL numbers from an emulation of Service Broker; not SQL Server measurements",
    "notes": ["PostgreSQL emulation: these numbers are PostgreSQL's, not SQL Server's.",
              "Wait types are mapped from PostgreSQL wait events (wait_mapping; docs/embedded.md): "
              "the analogy is loose by nature.",
              "The page-latch contention that the 150 trick relieves on SQL Server does not exist on "
              "PostgreSQL: expect no gain from it here."],
    "wait_mapping": EMBEDDED["wait_mapping"]}


def test_each_caveat_is_said_once():
    """The embedded target's one-line note repeats its first note, and its note on the wait
    mapping repeats the report's own caveat: each is said once."""
    from harness.targets.embedded import target as embedded_target

    source = Path(embedded_target.__file__).read_text()
    for n in [EMBEDDED_AS_WRITTEN["note"], *EMBEDDED_AS_WRITTEN["notes"]]:
        assert n.split(" (")[0].split(": ")[0][:40] in source      # the fixture is what the target writes
    html = about_targets(_disc(EMBEDDED_AS_WRITTEN), {"r1": "PostgreSQL emulation"}, set())
    assert html.count("not SQL Server") == 1, html
    assert html.lower().count("mapped from postgresql wait events") == 1, html
    assert html.count("page-latch contention") == 1
    assert "the wait mapping used by this run" in html and "IO:WalSync" in html
    # an older run.json with the one-line note only still shows it
    only = {k: v for k, v in EMBEDDED_AS_WRITTEN.items() if k != "notes"}
    assert "not SQL Server measurements" in about_targets(_disc(only), {"r1": "x"}, set())


def test_embedded_without_mapping_or_notes_points_to_the_docs():
    """A run recorded before run.json carried the target's capabilities: read by its kind."""
    html = about_targets(_disc({"kind": "embedded", "label": "x"}), {"r1": "PostgreSQL emulation (x)"}, set())
    assert "mapped from PostgreSQL wait events" in html and "docs/targets.md" in html
    assert "does not exist on PostgreSQL" in html


def test_the_caveats_follow_the_declared_capabilities_not_the_kind():
    """A plugin's emulation gets the same caveats, named after its engine; a target that
    declares none gets none, whatever its kind says."""
    other = {"kind": "someplugin", "label": "y", "capabilities": {"emulation": "SQLite"}}
    html = about_targets(_disc(other), {"r1": "SQLite emulation (y)"}, set())
    assert "mapped from SQLite wait events" in html and "does not exist on SQLite" in html
    plain = {"kind": "embedded", "label": "z", "capabilities": {"emulation": None}}
    assert about_targets(_disc(plain), {"r1": "z"}, set()) == ""


def test_sql_server_notes_shown_and_synthetic_banner():
    target = {"kind": "mssql", "label": "SQL Server 16.0",
              "notes": ["a single-instance layout bypasses the transmission queue"]}
    html = about_targets(_disc(target), {"r1": "SQL Server 16.0"}, {"r1"})
    assert "a single-instance layout bypasses the transmission queue" in html
    assert "mapped from PostgreSQL" not in html
    assert "SYNTHETIC DATA: r1 was generated" in html and "r1 (SYNTHETIC)" in html


def test_verdict_words_count_the_comparisons_with_too_few_repetitions():
    gains = [{"n": 5, "baseline_n": 5, "threshold_pct": 10.0}, {"n": 2, "baseline_n": 5, "threshold_pct": 10.0},
             {"n": 5, "baseline_n": 1, "threshold_pct": 10.0}]
    assert "2 of 3 comparisons rest on fewer than 3 repetitions" in verdict_words(gains)
    assert "fewer than 3 repetitions on a side" not in verdict_words(gains[:1])
    assert "Every comparison rests" in verdict_words(gains[1:])
    assert "above +10 %" in verdict_words(gains)      # the runs' own threshold
    assert "repetitions: auto" in verdict_words(gains)
    # fewer because a noisy host's repetitions were kept out: said so
    noisy = [dict(g, kept_out=3) for g in gains[1:]]
    assert "6 of their repetitions were kept out of verdicts" in verdict_words(noisy)


def test_the_reports_tables_are_one_function_and_the_meta_ones_wrap():
    """The provenance and the disturbed repetitions go through markup.table with the wrapping
    'meta' class; a table's cells keep their own classes."""
    from harness.analysis.markup import table
    from harness.analysis.report import disturbed_section

    html = table([{"a": "x", "v": "gain"}], [("a", "A", "l"), ("v", "verdict", "verdict")], table_class="meta")
    assert "<table class='meta'>" in html and '<td class="l">x</td>' in html and 'class="v-gain"' in html
    assert "<table class=''>" in table([{"a": 1}], [("a", "A", "l")])
    rep = {"run_id": "r1", "perm_id": "p1", "rep": 2, "status": "noisy host"}
    html = disturbed_section([rep])
    assert "1 disturbed repetition(s)" in html and "<table class='meta'>" in html and "<td class=\"l\">p1</td>" in html
