"""The controller's HTTP endpoint (harness.load.control): a caller that goes away before its
reply (a Locust master killed mid-request) costs no server traceback on the run's stderr."""

from __future__ import annotations

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
