"""Matrix loading, validation and expansion (harness.matrix, `ssbench matrix`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.matrix import DialogStrategy, load_matrix

REPO = Path(__file__).resolve().parent.parent

GOOD = """\
name: t
axes:
  initiators: [1, 2]
  threads: [1, 5]
  dialogs: [per_thread, trick150, shared, {every_n: 10}]
  payload_bytes: [100, 8192]
  server: [durable]
run:
  warmup_seconds: 1
  measure_seconds: 2
broker:
  max_queue_readers: 4
"""


def write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_paper_matrix_has_528_permutations():
    m = load_matrix(REPO / "matrices" / "paper.yaml")
    perms = list(m.permutations())
    assert len(m) == len(perms) == 528
    assert len({p.id for p in perms}) == 528
    assert perms[0].id == "i1-t1-per_thread-p100-sql2005"
    assert perms[-1].id == "i3-t50-trick150-p8192-sql2008"
    assert m.profile_aliases(applies=True)["sql2008"] == "delayed"
    assert m.profile_aliases(applies=False) == {}


def test_order_initiators_outermost_then_threads_stepping_up():
    m = load_matrix(REPO / "matrices" / "paper.yaml")
    keys = [(p.initiators, p.threads) for p in m.permutations()]
    assert keys == sorted(keys)
    assert [p.index for p in m.permutations()] == list(range(1, 529))


def test_bench_and_gate_matrices_are_valid():
    bench = load_matrix(REPO / "matrices" / "bench.yaml")
    assert len(bench) == 9 and bench.run.order == "interleaved"
    # repetitions until the verdict is known, within a budget that leaves the analysis its minute
    assert bench.run.auto and bench.run.planned_repetitions >= 3 and bench.run.most_repetitions > 3
    assert bench.run.budget_minutes is not None and bench.run.budget_minutes <= 9
    assert bench.run.describe_repetitions() == "auto repetitions (3 to 8 within 9 min)"
    # the strategies alternate inside each window (one window per thread count and round)
    assert bench.run.alternate and bench.run.slice_seconds == 0.5
    windows = {p.threads: bench.run_for(p).measure_seconds for p in bench.permutations()}
    assert windows == {1: 12.0, 8: 6.0, 32: 6.0}     # one thread's rate is the noisiest
    g = load_matrix(REPO / "matrices" / "gate.yaml")
    assert g.run.repetitions >= 4


def test_ids_are_stable_and_readable(tmp_path):
    m = load_matrix(write(tmp_path, GOOD))
    ids = [p.id for p in m.permutations()]
    assert len(ids) == 2 * 2 * 4 * 2 == len(set(ids))
    assert ids[:4] == ["i1-t1-per_thread-p100-durable", "i1-t1-per_thread-p8192-durable",
                       "i1-t1-trick150-p100-durable", "i1-t1-trick150-p8192-durable"]
    assert "i2-t5-every10-p8192-durable" in ids
    assert "i1-t5-shared-p100-durable" in ids
    # the same file loads to the same ids; the hash identifies the file
    m2 = load_matrix(write(tmp_path, GOOD, "copy.yaml"))
    assert [p.id for p in m2.permutations()] == ids and m2.sha256 == m.sha256


def test_optional_broker_axes_extend_ids(tmp_path):
    text = GOOD.replace("  server: [durable]\n", "  server: [durable]\n  max_queue_readers: [1, 8]\n")
    m = load_matrix(write(tmp_path, text))
    perms = list(m.permutations())
    assert len(perms) == 64
    assert perms[0].id.endswith("-r1") and perms[1].id.endswith("-r8")
    assert perms[1].broker.max_queue_readers == 8


def test_dialog_strategies():
    assert DialogStrategy.parse("trick150").dialogs_created(50) == 7500
    assert DialogStrategy.parse("per_thread").dialogs_created(50) == 50
    assert DialogStrategy.parse("shared").usable_dialogs(50) == 1
    assert DialogStrategy.parse({"every_n": 150}) == DialogStrategy.parse("trick150")


def test_settings_are_read(tmp_path):
    m = load_matrix(write(tmp_path, GOOD))
    assert m.run.warmup_seconds == 1 and m.run.measure_seconds == 2
    assert m.broker.max_queue_readers == 4 and m.broker.receive_top == 10000


BAD = [
    ("unknown top key", GOOD + "bogus: 1\n", 13, "bogus", "unknown key"),
    ("unknown axis", GOOD.replace("  server: [durable]", "  server: [durable]\n  colour: [red]"), 8,
     "axes.colour", "unknown axis"),
    ("unknown run key", GOOD.replace("  measure_seconds: 2", "  measure_seconds: 2\n  speed: 3"), 11,
     "run.speed", "unknown key"),
    ("wrong type", GOOD.replace("threads: [1, 5]", "threads: [1, five]"), 4, "axes.threads[1]",
     "must be an integer"),
    ("float threads", GOOD.replace("threads: [1, 5]", "threads: [1, 2.5]"), 4, "axes.threads[1]",
     "must be an integer"),
    ("empty axis", GOOD.replace("payload_bytes: [100, 8192]", "payload_bytes: []"), 6,
     "axes.payload_bytes", "empty axis"),
    ("zero threads", GOOD.replace("threads: [1, 5]", "threads: [0, 5]"), 4, "axes.threads[0]",
     "must be positive"),
    ("negative initiators", GOOD.replace("initiators: [1, 2]", "initiators: [-1, 2]"), 3,
     "axes.initiators[0]", "must be positive"),
    ("payload over 2 GB", GOOD.replace("8192]", "3000000000]"), 6, "axes.payload_bytes[1]", "over 2 GB"),
    ("unknown strategy", GOOD.replace("shared,", "every_other,"), 5, "axes.dialogs[2]",
     "unknown dialog strategy"),
    ("duplicate value", GOOD.replace("threads: [1, 5]", "threads: [5, 5]"), 4, "axes.threads[1]",
     "duplicate value"),
    ("duplicate strategy", GOOD.replace("{every_n: 10}", "{every_n: 150}"), 5, "axes.dialogs[3]",
     "duplicate value"),
    ("missing axis", GOOD.replace("  server: [durable]\n", ""), 3, "axes.server", "missing axis"),
    ("bool as int", GOOD.replace("max_queue_readers: 4", "max_queue_readers: true"), 12,
     "broker.max_queue_readers", "must be an integer"),
    ("duplicate key", GOOD.replace("  threads: [1, 5]\n", "  threads: [1, 5]\n  threads: [2]\n"), 5,
     "axes.threads", "duplicate key"),
    ("axis not a list", GOOD.replace("threads: [1, 5]", "threads: 5"), 4, "axes.threads", "must be a list"),
    ("bad server name", GOOD.replace("server: [durable]", "server: ['x; drop']"), 7, "axes.server[0]",
     "server profile"),
]


@pytest.mark.parametrize("label,text,line,field,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_line_field(tmp_path, label, text, line, field, message):
    p = write(tmp_path, text)
    with pytest.raises(UserError) as ei:
        load_matrix(p)
    e = ei.value
    assert e.file == str(p) and e.field == field and e.line == line, str(e)
    assert message in str(e)


def test_invalid_yaml_and_missing_file(tmp_path):
    with pytest.raises(UserError, match="invalid YAML") as ei:
        load_matrix(write(tmp_path, "axes: [1, 2\n"))
    assert ei.value.line is not None
    with pytest.raises(UserError, match="no such file"):
        load_matrix(tmp_path / "nope.yaml")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def test_cli_count_prints_528():
    r = _cli("matrix", "matrices/paper.yaml", "--count")
    assert r.returncode == 0 and r.stdout == "528\n"


def test_cli_lists_permutations():
    r = _cli("matrix", "matrices/bench.yaml")
    assert r.returncode == 0
    assert "i1-t32-shared-p100-durable" in r.stdout


def test_cli_user_error_exit_2_no_traceback(tmp_path):
    p = write(tmp_path, GOOD.replace("threads: [1, 5]", "threads: [0]"))
    r = _cli("matrix", str(p), "--count")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"{p}:4: axes.threads[0]: must be positive" in r.stderr


def test_embedded_profiles_checked_against_the_names_given(tmp_path):
    text = GOOD + "embedded_profiles:\n  durable: nosuch\n"
    p = write(tmp_path, text)
    load_matrix(p)  # this module knows no target: any name passes without a list
    with pytest.raises(UserError, match="unknown embedded profile 'nosuch'") as e:
        load_matrix(p, embedded_profiles=["durable", "delayed"])
    assert e.value.field == "embedded_profiles.durable"


SMALL = """\
name: s
axes:
  initiators: [1]
  threads: [1]
  dialogs: [per_thread, shared]
  payload_bytes: [100]
  server: [durable]
"""


@pytest.mark.parametrize("order, expected", [
    ("interleaved", [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]),
    ("sequential", [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]),
])
def test_schedule_follows_run_order(tmp_path, order, expected):
    m = load_matrix(write(tmp_path, SMALL + f"run:\n  repetitions: 3\n  order: {order}\n"))
    ids = {p.id: n for n, p in zip("ab", m.permutations())}
    assert [(ids[p.id], r) for p, r in m.schedule()] == expected


def test_interleaved_is_the_default_and_bad_orders_are_refused(tmp_path):
    assert load_matrix(write(tmp_path, SMALL)).run.order == "interleaved"
    with pytest.raises(UserError, match="must be one of interleaved, sequential") as e:
        load_matrix(write(tmp_path, SMALL + "run:\n  order: random\n"))
    assert e.value.field == "run.order"
    with pytest.raises(UserError, match="true or false"):
        load_matrix(write(tmp_path, SMALL + "run:\n  pin_cpus: 1\n"))


def test_waitfor_and_priority_axes(tmp_path):
    """waitfor_timeout_ms and priority are optional axes: they set the broker settings, name
    the permutation (-wf<ms>, -hp<share>) and reach summary.json through values()."""
    from harness.errors import UserError
    from harness.matrix import high_priority_slot

    p = tmp_path / "m.yaml"
    p.write_text("name: t\naxes:\n  initiators: [1]\n  threads: [2]\n  dialogs: [per_thread]\n"
                 "  payload_bytes: [100]\n  server: [sql]\n  waitfor_timeout_ms: [0, 3000]\n"
                 "  priority: [0, 0.25]\n")
    m = load_matrix(p)
    perms = list(m.permutations())
    assert [x.id for x in perms] == ["i1-t2-per_thread-p100-sql-wf0-hp0", "i1-t2-per_thread-p100-sql-wf0-hp0.25",
                                     "i1-t2-per_thread-p100-sql-wf3000-hp0",
                                     "i1-t2-per_thread-p100-sql-wf3000-hp0.25"]
    assert perms[1].broker.waitfor_timeout_ms == 0 and perms[1].broker.high_priority_share == 0.25
    assert perms[3].values()["broker"]["waitfor_timeout_ms"] == 3000
    assert perms[3].values()["broker"]["high_priority_share"] == 0.25
    m.check_servers("mssql", ["sql"], supports={"priority"})
    with pytest.raises(UserError, match=r"m.yaml:9: axes.priority\[1\]: the embedded target does not emulate priority"):
        m.check_servers("embedded", ["sql"], aliases=True)
    assert [k for k in range(1, 9) if high_priority_slot(k, 0.25)] == [4, 8]
    assert all(high_priority_slot(k, 1.0) for k in range(1, 9))


def test_blocks_are_a_union_of_products_each_with_its_own_axes(tmp_path):
    """``blocks:`` (docs/matrices.md): each block's axes are crossed with the common ones only;
    ids, broker settings and the load mode come from the block; run.json records the blocks."""
    text = GOOD.replace("  initiators: [1, 2]\n", "  initiators: [1]\n").replace(
        "  threads: [1, 5]\n", "  threads: [4]\n").replace(
        "  dialogs: [per_thread, trick150, shared, {every_n: 10}]\n", "  dialogs: [per_thread]\n").replace(
        "  payload_bytes: [100, 8192]\n", "  payload_bytes: [100]\n")
    text += ("blocks:\n  - messages_per_dialog: [1, unlimited]\n    fire_and_forget: [false, true]\n"
             "  - waitfor_timeout_ms: [50, 3000]\n    rate: [10]\n    max_queue_readers: [1]\n")
    m = load_matrix(write(tmp_path, text))
    perms = list(m.permutations())
    assert [p.id.removeprefix("i1-t4-per_thread-p100-durable-") for p in perms] == [
        "mpd1", "mpd1-ff", "mpdunlimited", "r1-wf50-rate10", "r1-wf3000-rate10"]
    assert [p.index for p in perms] == [1, 2, 3, 4, 5] and len(m) == 5
    lifetime, churn = perms[0], perms[3]
    assert lifetime.rate is None and lifetime.broker.waitfor_timeout_ms == 3000   # the broker section's
    assert lifetime.broker.max_queue_readers == 4 and lifetime.messages_per_dialog == 1
    assert churn.rate == 10.0 and churn.broker.waitfor_timeout_ms == 50 and churn.broker.max_queue_readers == 1
    assert churn.messages_per_dialog is None and not churn.fire_and_forget
    d = m.to_dict()
    assert d["blocks"][0] == {"messages_per_dialog": [1, "unlimited"], "fire_and_forget": [False, True]}
    assert d["permutations"] == 5 and "blocks" not in load_matrix(write(tmp_path, GOOD, "g.yaml")).to_dict()
    # the techniques matrix is written this way
    assert load_matrix(REPO / "matrices" / "techniques.yaml").blocks


@pytest.mark.parametrize("path", sorted((Path(__file__).parent.parent / "matrices").glob("*.yaml")), ids=lambda p: p.name)
def test_a_matrix_written_from_its_document_loads_back_equal(path, tmp_path):
    """Matrix.document() is how ssbench writes a matrix it built (a web session's): it loads
    back to the same settings and permutations."""
    import yaml
    m = load_matrix(path)
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(m.document(), sort_keys=False))
    again = load_matrix(copy)
    assert (again.run, again.broker, again.cases, again.blocks) == (m.run, m.broker, m.cases, m.blocks)
    assert [p.values() for p in again.permutations()] == [p.values() for p in m.permutations()]
    assert {**again.to_dict(), "file": "", "sha256": ""} == {**m.to_dict(), "file": "", "sha256": ""}
