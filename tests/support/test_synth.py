"""Synthetic runs are written through the results contract: they read back through
harness.results.RunReader and the model's from_json like a measured run, and they say that
they are synthetic. Fast: no Spark."""

from __future__ import annotations

import statistics

from support import synth
from harness.results import PermutationSummary, RunReader, read_json


def test_a_synthetic_run_reads_back_through_the_model(tmp_path):
    spec = synth.small_spec(name="rt", initiators=(1, 2), threads=(1, 5), payloads=(100,), repetitions=2,
                            measure_seconds=3, warmup_seconds=1, drain_seconds=1)
    run = synth.synthesize(tmp_path, spec, run_id="20261121-000000-rt")
    reader = RunReader(run)
    record = reader.record()
    assert record.status == "complete" and record.run_id == run.name
    assert record.extra["synthetic"] is True and record.target["synthetic"] is True
    assert record.target["label"].startswith(synth.SYNTHETIC_PREFIX)
    assert len(reader.permutation_ids()) == spec.permutations
    reps = reader.reps()
    assert len(reps) == spec.permutations * spec.repetitions
    for ref in reps:
        s = ref.summary()  # RepetitionSummary.from_json: schema, fields and types checked
        assert s.permutation_id == ref.perm_id and s.repetition == ref.rep
        assert s.users_expected == s.users_spawned == s.users_active == \
            s.permutation["initiators"] * s.permutation["threads"]
        assert s.window.spawn_complete is not None
        assert [p.xmitq_left for p in s.per_initiator] == [0] * s.permutation["initiators"]
        assert s.target.label.startswith(synth.SYNTHETIC_PREFIX)
        assert ref.samples_path.stat().st_size > 0 and ref.latency_path.is_file()
        # the writer's JSON round-trips unchanged through the model
        assert type(s).from_json(s.to_json()).to_json() == read_json(ref.summary_path)
    for perm in reader.permutation_ids():
        ps = reader.permutation_summary(perm)
        assert isinstance(ps, PermutationSummary) and ps.repetitions == [1, 2]
        assert ps.median["send_rate"] == statistics.median(s.send_rate for s in reader.summaries(perm))


def test_same_as_and_effect_shape_the_rates(tmp_path):
    base = dict(initiators=(1,), threads=(10,), payloads=(100,), dialogs=("per_thread", "trick150"),
                repetitions=3, measure_seconds=3, warmup_seconds=1, drain_seconds=1, noise=0.0)
    run = synth.synthesize(tmp_path, synth.small_spec(name="fx", same_as=(("trick150", "per_thread"),),
                                                      effect=(("trick150", 1.4),), **base), run_id="fx")
    reader = RunReader(run)
    rate = {p: statistics.median(s.send_rate for s in reader.summaries(p)) for p in reader.permutation_ids()}
    ratio = rate["i1-t10-trick150-p100-durable"] / rate["i1-t10-per_thread-p100-durable"]
    assert 1.3 < ratio < 1.5, ratio


def test_a_synthetic_run_is_not_fsynced_and_a_measured_one_is(tmp_path, monkeypatch):
    """Synthetic files can be made again: no fsync (the paper-sized set's 6,000 files waited
    minutes on a busy disk). A run's own files still are: temp file and directory."""
    import os

    from harness.results import write_json

    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    synth.synthesize(tmp_path, synth.small_spec(name="nf", initiators=(1,), threads=(1,), payloads=(100,)),
                     run_id="nf")
    assert synced == []
    write_json(tmp_path / "nf" / "x.json", {"a": 1})
    assert len(synced) == 2
