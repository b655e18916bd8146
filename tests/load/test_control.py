"""The controller's HTTP endpoint (harness.load.control): a caller that goes away before its
reply (a Locust master killed mid-request) costs no server traceback on the run's stderr."""

from __future__ import annotations

import logging
import socket
import struct
import time
from urllib.parse import urlparse

from harness.load.control import ControlServer


def test_a_caller_gone_before_its_reply_prints_no_traceback(capfd):
    answered = []

    def slow(_body):
        time.sleep(0.3)              # the caller is gone by now
        answered.append(True)
        return {"ok": True, "padding": "x" * 200_000}

    srv = ControlServer({"POST /status": slow}).start()
    try:
        u = urlparse(srv.url)
        s = socket.create_connection((u.hostname, u.port))
        s.sendall(f"POST {u.path.rstrip('/')}/status HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode())
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()                    # a reset, as a killed process's socket
        deadline = time.monotonic() + 5
        while not answered and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        srv.stop()
    assert answered
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err


def _raw(srv: ControlServer, request: bytes, *, reset: bool) -> bytes:
    u = urlparse(srv.url)
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(request.replace(b"{path}", f"{u.path.rstrip('/')}/status".encode()))
    if reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        return b""
    s.settimeout(5)
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    s.close()
    return out


def test_a_request_cut_off_in_its_body_is_not_read_as_an_empty_message(capfd, caplog):
    """A master killed while it posts: the headers arrive, the body does not. This was read as
    ``{}`` and the handler's "expected a status message, got None" traceback reached the run's
    stderr (CI, a client host's worker killed mid-window)."""
    from harness.load.protocol import Status

    seen = []
    srv = ControlServer({"POST /status": lambda body: seen.append(Status.from_wire(body)) or {"ok": True}}).start()
    try:
        _raw(srv, b"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n", reset=True)
        _raw(srv, b'POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 300\r\n\r\n{"type": "sta', reset=True)
        time.sleep(0.5)
    finally:
        srv.stop()
    assert seen == []
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING] == []
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ProtocolError" not in err, err


def test_a_message_the_controller_cannot_read_is_a_400_in_one_line(capfd, caplog):
    from harness.load.protocol import Status

    srv = ControlServer({"POST /status": lambda body: Status.from_wire(body).to_wire()}).start()
    try:
        wrong = _raw(srv, b'POST {path} HTTP/1.0\r\nContent-Length: 15\r\n\r\n{"type": "xyz"}', reset=False)
        garbled = _raw(srv, b'POST {path} HTTP/1.0\r\nContent-Length: 5\r\n\r\n{"ty"', reset=False)
        no_length = _raw(srv, b'POST {path} HTTP/1.0\r\nContent-Length: five\r\n\r\n{}', reset=False)
        ok = _raw(srv, b'POST {path} HTTP/1.0\r\nContent-Length: %d\r\n\r\n' % len(body := (
            b'{"type": "status", "v": %d, "swarm_id": "s", "phase": "running"}' % Status().to_wire()["v"])) + body,
            reset=False)
    finally:
        srv.stop()
    assert wrong.startswith(b"HTTP/1.0 400") and b"expected a status message, got 'xyz'" in wrong, wrong
    assert garbled.startswith(b"HTTP/1.0 400") and b"not JSON" in garbled, garbled
    assert no_length.startswith(b"HTTP/1.0 400") and b"bad Content-Length" in no_length, no_length
    assert ok.startswith(b"HTTP/1.0 200") and b'"phase": "running"' in ok, ok
    assert [r.exc_info for r in caplog.records if r.name == "harness.load.control"] == [None, None, None]
    assert "Traceback" not in capfd.readouterr().err
