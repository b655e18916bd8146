"""A worker's recording file from a real recorder, without Locust: its deltas merged by the
master's real merge (harness.load.merge) and written as the controller writes it."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack

from harness.load.merge import SlotRecording
from harness.load.protocol import Delta, recording_file
from harness.load.recorder import Recorder


def delta(rec: Recorder, seq: int, now: float | None = None, final: bool = False, **kw) -> Delta:
    """The recorder's delta at ``now`` (the last: ``final``), through Locust's wire form."""
    d = Delta(swarm_id="s", initiator=rec.initiator, worker=rec.worker, seq=seq, final=final,
              bucket_seconds=rec.bucket_seconds, host="client-a", **rec.take_delta(now=now, final=final), **kw)
    return Delta.from_wire(msgpack.unpackb(msgpack.packb(d.to_wire()), raw=False, strict_map_key=False))


def write_recording(rec: Recorder, out: Path, merged: SlotRecording | None = None, seq: int = 1) -> Path:
    """The recording file of ``rec``: its last delta added to ``merged`` (the earlier ones, if
    any), through JSON as the controller writes it."""
    merged = merged or SlotRecording(rec.initiator, rec.worker)
    merged.add(delta(rec, seq, final=True))
    path = Path(out) / recording_file(rec.initiator, rec.worker)
    path.write_text(json.dumps(merged.to_json("s")))
    return path
