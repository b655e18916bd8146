"""The dialog-lifetime axes in the matrix: values, ids, expansion, summary values."""

from __future__ import annotations

from harness.matrix import load_matrix

BASE = """axes:
  initiators: [1]
  threads: [2]
  dialogs: [per_thread]
  payload_bytes: [100]
  server: [durable]
"""


def _load(tmp_path, extra=""):
    p = tmp_path / "m.yaml"
    p.write_text(BASE + extra)
    return load_matrix(p)


def test_absent_axes_leave_ids_and_defaults_unchanged(tmp_path):
    (p,) = _load(tmp_path).permutations()
    assert p.id == "i1-t2-per_thread-p100-durable"
    assert p.messages_per_dialog is None and p.fire_and_forget is False
    v = p.values()   # the defaults are not written: values as before the axes existed
    assert "messages_per_dialog" not in v and "fire_and_forget" not in v


def test_values_ids_and_the_pointless_combination_left_out(tmp_path):
    m = _load(tmp_path, "  messages_per_dialog: [1, 100, unlimited]\n  fire_and_forget: [false, true]\n")
    perms = list(m.permutations())
    assert [p.id.removeprefix("i1-t2-per_thread-p100-durable-") for p in perms] == \
        ["mpd1", "mpd1-ff", "mpd100", "mpd100-ff", "mpdunlimited"]
    assert len(m) == 5 and [p.index for p in perms] == [1, 2, 3, 4, 5]
    assert [(p.values().get("messages_per_dialog"), p.values().get("fire_and_forget")) for p in perms] == \
        [(1, False), (1, True), (100, False), (100, True), (None, None)]
    assert m.to_dict()["axes"]["messages_per_dialog"] == [1, 100, "unlimited"]
    assert len({p.id for p in perms}) == 5
