"""free_port(): a listener's port outside the kernel's ephemeral range, so an outgoing
connection cannot take it between the check and the listener's bind (a CI failure: the Locust
master's "Address already in use")."""

import random
import socket

from harness.ports import EPHEMERAL_DEFAULT, ephemeral_ports, free_port


def test_the_port_is_below_the_ephemeral_range_and_bindable():
    lo, _ = ephemeral_ports()
    for _ in range(20):
        port = free_port()
        assert max(1024, lo - 20000) <= port < lo
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))   # nobody holds it


def test_a_port_in_use_is_skipped():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        port = free_port(random.Random(3))
        held.bind(("127.0.0.1", port))
        held.listen()
        assert free_port(random.Random(3)) != port   # the same choices, the first one taken


def test_the_range_is_read_from_the_kernel_or_defaults(tmp_path):
    f = tmp_path / "range"
    f.write_text("40000\t50000\n")
    assert ephemeral_ports(str(f)) == (40000, 50000)
    assert ephemeral_ports(str(tmp_path / "missing")) == EPHEMERAL_DEFAULT
