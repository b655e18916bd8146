"""harness.load.placement: users split over an initiator's workers, workers placed by their
claims, and the dispatcher that gives each placed worker exactly its users (unit tests; the
dispatcher runs here as Locust's master iterates it, in a subprocess free of gevent's patching)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.load.placement import Slot, assign, rescale, slots, split
from harness.load.protocol import Claim


@given(st.integers(0, 500), st.integers(1, 64))
def test_split_is_as_even_as_possible_and_adds_up(n, parts):
    out = split(n, parts)
    assert len(out) == parts and sum(out) == n
    assert max(out) - min(out) <= 1 and out == sorted(out, reverse=True)


def test_slots_cap_workers_at_threads_and_number_users_per_initiator():
    assert slots({"1": 5, "2": 1}, 2) == [Slot(1, 1, 3, 0), Slot(1, 2, 2, 3), Slot(2, 1, 1, 0)]
    assert slots({"1": 3}, 4) == [Slot(1, 1, 1, 0), Slot(1, 2, 1, 1), Slot(1, 3, 1, 2)]
    assert slots({"2": 2, "1": 0}, 1) == [Slot(2, 1, 2, 0)]


@given(st.dictionaries(st.integers(1, 3).map(str), st.integers(0, 60), min_size=1), st.integers(1, 8))
def test_every_user_of_an_initiator_has_one_index(users, wpi):
    got = slots(users, wpi)
    for i, n in users.items():
        mine = [s for s in got if s.initiator == int(i)]
        idx = [s.first_user + k for s in mine for k in range(s.users)]
        assert idx == list(range(n))
        assert len(mine) == (min(wpi, n) if n else 0)


def test_claims_exact_first_then_initiator_then_any():
    free = slots({"1": 4, "2": 4}, 2)
    claims = {"a": Claim(initiator=None), "b": Claim(initiator=2, worker=2), "c": Claim(initiator=1),
              "d": Claim(initiator=3), "e": Claim(initiator=None), "f": Claim(initiator=None)}
    got = assign(claims, free)
    assert got["b"] == Slot(2, 2, 2, 2)
    assert got["c"] == Slot(1, 1, 2, 0)
    assert got["a"] == Slot(1, 2, 2, 2) and got["e"] == Slot(2, 1, 2, 0)   # the lowest free slots, in id order
    assert "d" not in got and "f" not in got          # no slot for initiator 3; none left for f
    assert len(set(got.values())) == len(got) == 4


def test_rescale_spreads_a_new_total_over_initiators_then_workers():
    placed = {"a": Slot(1, 1, 2, 0), "b": Slot(1, 2, 2, 2), "c": Slot(2, 1, 4, 0)}
    assert rescale(placed, 5, 2) == {"a": 2, "b": 1, "c": 2}
    assert rescale(placed, 0, 2) == {"a": 0, "b": 0, "c": 0}


DISPATCH = textwrap.dedent("""
    import json
    from locust import User
    from locust.runners import WorkerNode
    from harness.load.placement import make_dispatcher

    class U(User):
        pass

    quotas = {"w1": 3, "w2": 2}
    D = make_dispatcher(lambda total: dict(quotas) if total == 5 else {"w1": 1, "w2": 1})
    d = D(worker_nodes=[WorkerNode("w1"), WorkerNode("w2"), WorkerNode("idle")], user_classes=[U])
    out = []
    d.new_dispatch(5, spawn_rate=1000)
    out.append([x for x in d])
    d.new_dispatch(2, spawn_rate=1000)             # a ramp-down in the web UI
    out.append([x for x in d])
    d.new_dispatch(2, spawn_rate=1000)             # nothing to change: still one dispatch
    out.append([x for x in d])
    print(json.dumps(out))
""")


@pytest.mark.swarm
@pytest.mark.untimed("which worker got which users")
def test_the_dispatcher_gives_each_placed_worker_its_quota_and_none_to_others():
    r = subprocess.run([sys.executable, "-c", DISPATCH], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    import json

    up, down, same = json.loads(r.stdout.strip().splitlines()[-1])
    assert up[-1] == {"w1": {"U": 3}, "w2": {"U": 2}}           # the idle worker is never named
    assert down[-1] == {"w1": {"U": 1}, "w2": {"U": 1}}
    assert len(same) == 1 and same[0] == down[-1]


@pytest.mark.parametrize("n, rate, steps", [(5, 1000, 1), (6, 2, 3)])
@pytest.mark.swarm
@pytest.mark.untimed("the steps of the ramp, counted")
def test_the_dispatcher_ramps_at_the_spawn_rate(n, rate, steps):
    code = DISPATCH.replace('quotas = {"w1": 3, "w2": 2}', f'quotas = {{"w1": {n - n // 2}, "w2": {n // 2}}}') \
        .replace("total == 5", f"total == {n}").replace("d.new_dispatch(5, spawn_rate=1000)",
                                                         f"d.new_dispatch({n}, spawn_rate={rate})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    import json

    up = json.loads(r.stdout.strip().splitlines()[-1])[0]
    assert len(up) == steps
    totals = [sum(v["U"] for v in d.values()) for d in up]
    assert totals == sorted(totals) and totals[-1] == n
