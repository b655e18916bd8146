"""The diagnosis at scale (harness.analysis.diagnosis_groups): permutations grouped by limit and
remedy, the terminal's grouped summary above a few dozen permutations (each limit, how many
permutations, the remedy once), and the report's grouped table with the detail folded away.
Fast: no Spark, no server."""

from __future__ import annotations

from harness.analysis import diagnosis as D
from harness.analysis import diagnosis_view as V
from harness.analysis.diagnosis_groups import GROUP_ABOVE, group_by_limit

SHAPES = [("SEND", "log flush", D.REMEDIES["log flush"], "clear"),
          ("SEND", "page latch", D.REMEDIES["page latch"], "clear"),
          ("client", "the load generator", D.REMEDIES["client"], "mixed"),
          (None, "", None, D.NO_DATA)]


def diag(i: int, shape: int, emulation: str | None = "PostgreSQL") -> D.Diagnosis:
    stage, detail, remedy, confidence = SHAPES[shape]
    t = 1 + i % 50
    return D.Diagnosis(run_id="r", perm_id=f"i{1 + i % 3}-t{t}-p{i}", reps=3, stage=stage, detail=detail,
                       confidence=confidence, evidence="log flush waits 740 ms/s (WRITELOG the largest): "
                       "0.7 of 1 users waiting, 74 % of their time" if stage else "", remedy=remedy,
                       permutation={"index": i, "threads": t, "total_threads": t, "initiators": 1 + i % 3,
                                    "dialogs": "per_thread", "payload_bytes": 100 + i, "server": "durable"},
                       emulation=emulation)


def paper_sized() -> list[D.Diagnosis]:
    """528 permutations over four limits, unevenly: 300, 150, 70 and 8."""
    return [diag(i, 0 if i < 300 else 1 if i < 450 else 2 if i < 520 else 3) for i in range(528)]


def test_groups_by_limit_and_remedy_the_largest_first():
    diags = paper_sized()
    diags[5] = D.Diagnosis(**{**diags[5].__dict__, "confidence": "mixed"})
    groups = group_by_limit(diags)
    assert [(g.limit, g.count) for g in groups] == [("SEND: log flush", 300), ("SEND: page latch", 150),
                                                    ("client: the load generator", 70), (D.NO_DATA, 8)]
    assert groups[0].confidences() == "clear 299, mixed 1"
    assert groups[0].remedy is D.REMEDIES["log flush"] and groups[3].remedy is None
    assert groups[0].examples(2) == "i1-t1-p0, i2-t2-p1 and 298 more"
    assert sum(g.count for g in groups) == 528
    # one limit with two remedies is two groups: the remedy is said once per group
    other = D.Diagnosis(**{**diags[0].__dict__, "remedy": D.REMEDIES["client"]})
    assert len(group_by_limit([diags[0], other])) == 2


def test_the_terminal_summarises_a_paper_sized_run_in_a_few_lines():
    diags = paper_sized()
    text = V.terminal_text(diags)
    lines = text.splitlines()
    assert len(lines) <= 30, text
    assert "528 permutations, 4 limits" in lines[1]
    assert "(PostgreSQL emulation: the limits found are the emulation's, not SQL Server's)" in lines[2]
    assert "SEND: log flush: 300 permutations  [clear 300]" in text
    assert text.count("try: DELAYED_DURABILITY") == 1            # the remedy once, not 300 times
    assert "evidence:" not in text and "i1-t1-p0" in text         # a few ids; the detail is elsewhere
    assert "the report, tables/diagnosis.csv and --json" in text
    assert all(len(line) <= 100 for line in lines)


def test_up_to_a_few_dozen_permutations_the_terminal_keeps_the_detail():
    few = [diag(i, i % 3) for i in range(GROUP_ABOVE)]
    text = V.terminal_text(few)
    assert text.count("    evidence: ") == GROUP_ABOVE and "permutations" not in text.splitlines()[1]
    assert "i1-t1-p0: SEND: log flush  [clear, 3 repetitions]" in text
    grouped = V.terminal_text(few + [diag(GROUP_ABOVE, 0)])
    assert "evidence:" not in grouped and f"{GROUP_ABOVE + 1} permutations, 3 limits" in grouped


def test_the_report_states_each_remedy_once_and_folds_the_detail():
    diags = paper_sized()
    html = V.report_section(diags)
    head, detail = html.split("<details", 1)
    assert head.count("<tbody><tr>") == 1 and head.count("<tr>") == 1 + 4      # a header and a row per limit
    assert head.count(D.REMEDIES["log flush"].technique) == 1
    assert D.REMEDIES["log flush"].technique not in detail                     # not repeated per permutation
    assert "Each permutation's evidence (528 permutations" in detail and "<details open" not in html
    assert detail.count("log flush waits 740 ms/s") == 520
    small = V.report_section(diags[:GROUP_ABOVE])
    assert "<details open><summary>Each permutation's evidence" in small
    assert V.group_rows(diags)[0] == {"limit": "SEND: log flush", "count": 300, "confidence": "clear 300",
                                      "technique": D.REMEDIES["log flush"].technique,
                                      "try_axis": D.REMEDIES["log flush"].axis,
                                      "source": D.REMEDIES["log flush"].source}
