"""harness.load.protocol: every message survives its wire form (JSON, msgpack), names its type
and version, refuses another version in one sentence, and ignores fields it does not know."""

from __future__ import annotations

import json

import msgpack
import pytest

from harness.load.protocol import (LOCUST_TYPES, VERSION, Assignment, Claim, Command, Delta, Failure, Notice,
                                   ProtocolError, Recording, Status, SwarmPlan, SwarmRequest)
from harness.load.spec import SwarmSpec

SPEC = SwarmSpec(sender_specs={"1": {"kind": "embedded", "conninfo": "host=/tmp"}}, payload_bytes=64,
                 usable={"1": 3}, users={"1": 3}, rate=10.0, send_mode="thread")

MESSAGES = [
    SwarmRequest(users=8, spawn_rate=2.5, form={"initiators": 2, "dialogs": "shared"}),
    SwarmPlan(spec=SPEC, users={"1": 3}, workers_per_initiator=2, warmup_seconds=1, planned_seconds=2,
              live_window=[1, 2]),
    SwarmPlan(error="the target is down"),
    Status(swarm_id="abc", phase="running", facts={"spawn_complete": 1.5, "workers": {"i1.w1": {"host": "h"}}}),
    Command(stop=True), Failure(swarm_id="abc", what="lost", text="gone"), Notice(text="hi"),
    Claim(initiator=1, worker=None, host="h", pid=7),
    Assignment(spec=SPEC, initiator=1, worker=2, users=1, first_user=2),
    Recording(swarm_id="abc", initiator=1, worker=2, data={"buckets": {"1": {"5": 2}}}),
    Status(swarm_id="abc", phase="ended", live={"sends": [[1, 1, "measure", 5]], "quantiles": {}}),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip_through_json_and_msgpack(msg):
    for wire in (json.loads(json.dumps(msg.to_wire())), msgpack.unpackb(msgpack.packb(msg.to_wire()))):
        assert wire["type"] == type(msg).TYPE and wire["v"] == VERSION
        assert type(msg).from_wire(wire) == msg


def test_another_version_or_type_is_refused_in_one_sentence():
    wire = Claim(initiator=1).to_wire()
    with pytest.raises(ProtocolError, match=r"protocol version 2, this ssbench speaks 1 \(run the same ssbench"):
        Claim.from_wire({**wire, "v": 2})
    with pytest.raises(ProtocolError, match="expected a assignment message, got 'claim'"):
        Assignment.from_wire(wire)
    with pytest.raises(ProtocolError):
        Claim.from_wire("not a dict")


def test_unknown_fields_are_ignored_a_newer_peer_may_add_them():
    wire = dict(Assignment(spec=SPEC, initiator=1, worker=1, users=3).to_wire(), shiny_new_field=1)
    wire["spec"] = dict(wire["spec"], another_new_field=True)
    got = Assignment.from_wire(wire)
    assert got.spec == SPEC and got.users == 3


def test_no_message_field_carries_a_password():
    """Sender specs name the environment variable a password is read from, never the password
    (the web auth unit tests check the SQL Server spec itself)."""
    for msg in MESSAGES:
        assert "password" not in json.dumps(msg.to_wire()).lower()


DELTA = Delta(swarm_id="abc", initiator=2, worker=1, seq=3, final=True, bucket_seconds=0.1, host="client-a", pid=7,
              buckets={17000000001: {812: 3, 1200: 1}}, errors={17000000001: 1}, corrected={17000000001: {900: 4}},
              priority={"high": {17000000001: {812: 3}}}, slow=[[1.7e9, 1_200_000]], error_kinds={"E: no": 1},
              users=5, samples=[[1.7e9, 12.5, 40.0, 21.5, 5.4e9]], user_spans={0: [1.7e9, 1.7e9, 4]},
              sends_cut_at_stop=1)


def test_a_delta_travels_as_locust_carries_it_integer_keys_included():
    """Locust's own wire form (its rpc Message: msgpack, ``strict_map_key=False``)."""
    wire = msgpack.unpackb(msgpack.packb(DELTA.to_wire()), raw=False, strict_map_key=False)
    assert Delta.from_wire(wire) == DELTA
    assert "password" not in json.dumps(DELTA.to_wire(), default=str).lower()


def test_every_worker_message_travels_on_its_own_locust_message_type():
    assert LOCUST_TYPES["delta"] == "ssbench_delta" and "recording" not in LOCUST_TYPES
    assert len(set(LOCUST_TYPES.values())) == len(LOCUST_TYPES)
