"""The one writer and the one reader of run directories (harness.results.store / .reader)."""

from __future__ import annotations

import json
import os

import pytest

from harness.errors import UserError
from harness.results import RunDir, RunReader, find_runs, latest_unfinished, write_atomic, write_json


def test_write_atomic_leaves_no_temporary_and_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    p = tmp_path / "a" / "f.json"
    write_json(p, {"x": 1})
    assert json.loads(p.read_text()) == {"x": 1}

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_atomic(p, "half")
    assert json.loads(p.read_text()) == {"x": 1}
    assert [f.name for f in p.parent.iterdir()] == ["f.json"]


def make_run(root, name="20260101-000000-tiny", status="complete", reps=((("p1", 1), True),)):
    rd = RunDir.create(root, "tiny", root / name)
    rd.update_run(run_id=name, status=status)
    for (perm, n), complete in reps:
        d = rd.rep_dir(perm, n)
        d.mkdir(parents=True)
        if complete:
            (d / "summary.json").write_text("{}")
    return rd


def test_reader_lists_only_complete_repetitions(tmp_path):
    rd = make_run(tmp_path, reps=((("p1", 2), True), (("p1", 1), True), (("p2", 1), False)))
    (rd.path / "p1" / ".rep-03.partial").mkdir()
    (rd.path / "report").mkdir()
    r = RunReader(rd.path)
    assert r.permutation_ids() == ["p1", "p2"]
    assert [(x.perm_id, x.rep) for x in r.reps()] == [("p1", 1), ("p1", 2)]
    assert [d.name for d in r.incomplete_rep_dirs()] == ["rep-01"]


def test_resume_finds_the_newest_unfinished_run_of_a_matrix(tmp_path):
    make_run(tmp_path, "20260101-000000-tiny", status="interrupted")
    make_run(tmp_path, "20260102-000000-tiny", status="complete")
    make_run(tmp_path, "20260103-000000-tiny-2", status="running")
    make_run(tmp_path, "20260104-000000-tinyer", status="running")
    assert [r.run_id for r in find_runs(tmp_path, "tiny")] == ["20260101-000000-tiny", "20260102-000000-tiny",
                                                              "20260103-000000-tiny-2"]
    assert latest_unfinished(tmp_path, "tiny").run_id == "20260103-000000-tiny-2"
    assert latest_unfinished(tmp_path, "nothing") is None


def test_run_record_stays_valid(tmp_path):
    rd = make_run(tmp_path)
    with pytest.raises(UserError, match="permutations_done"):
        rd.update_run(permutations_done="many")
    assert rd.record().status == "complete"
    rd.finish("complete", lost=0)
    assert rd.record().messages_lost == 0 and rd.record().ended


def test_create_refuses_a_file_and_a_non_empty_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        RunDir.create(tmp_path, "m", f)
    with pytest.raises(UserError, match="cannot create"):
        RunDir.create(tmp_path, "m", f / "sub")
    make_run(tmp_path, "used")
    with pytest.raises(UserError, match="not empty"):
        RunDir.create(tmp_path, "m", tmp_path / "used")


def test_runs_started_in_the_same_second_never_share_a_directory(tmp_path, monkeypatch):
    """Each create claims its directory exclusively: eight threads racing on one run id (the
    clock's second) get eight directories, and an empty --out is taken by one run only."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    monkeypatch.setattr(RunDir, "new_run_id", staticmethod(lambda name: f"20260101-000000-{name}"))
    gate = Barrier(8)

    def create(i):
        gate.wait()
        return RunDir.create(tmp_path / "results", "m", tmp_path / "out" if i % 2 else None).path

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(create, i) for i in range(8)]
    made = [f.result() for f in futures if f.exception() is None]
    refused = [f.exception() for f in futures if f.exception() is not None]
    assert len(made) == len(set(made)) == 5, made
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "20260101-000000-m", "20260101-000000-m-2", "20260101-000000-m-3", "20260101-000000-m-4"]
    assert len(refused) == 3 and all("not empty" in str(e) for e in refused)


def test_a_complete_repetition_is_never_replaced_and_an_incomplete_one_is(tmp_path):
    rd = make_run(tmp_path, reps=((("p1", 1), True), (("p1", 2), False)))
    partial = rd.begin_rep("p1", 1)
    with pytest.raises(UserError, match="a complete repetition is already there"):
        rd.commit_rep("p1", 1, partial)
    assert (rd.rep_dir("p1", 1) / "summary.json").read_text() == "{}" and partial.is_dir()
    partial = rd.begin_rep("p1", 2)
    (partial / "summary.json").write_text('{"new": 1}')
    rd.commit_rep("p1", 2, partial)
    assert (rd.rep_dir("p1", 2) / "summary.json").read_text() == '{"new": 1}'


def test_the_run_directory_lock_is_one_writer_at_a_time_and_names_it(tmp_path):
    """A second hold (another open file description, as another process would have) is refused
    naming this pid; released, the directory can be held again."""
    rd = make_run(tmp_path).hold()
    with pytest.raises(UserError, match=rf"another run is writing this results directory: .*pid {os.getpid()} on "):
        RunDir(rd.path).hold()
    rd.release()
    RunDir(rd.path).hold().release()
