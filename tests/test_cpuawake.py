"""run.keep_cpus_awake (harness.cpuawake): the PM QoS request is held at 0 µs while the context
lasts and gone after it, checked on the real /dev/cpu_dma_latency where this process may open it
(reading the file gives the latency every request together asks for); a host that refuses
it leaves a reason and the run goes on."""

from __future__ import annotations

import os
import struct

import pytest

from harness.cpuawake import PM_QOS_CPU, CpusAwake, idle_states
from harness.matrix import load_matrix
from support.embedded import REPO


def _requested_us() -> int:
    with open(PM_QOS_CPU, "rb") as f:
        return struct.unpack("i", f.read(4))[0]


@pytest.mark.skipif(not os.access(PM_QOS_CPU, os.R_OK | os.W_OK), reason="needs read and write access to "
                    f"{PM_QOS_CPU} (root on Linux)")
def test_the_request_is_held_at_zero_while_the_context_lasts_and_gone_after():
    before = _requested_us()
    with CpusAwake() as awake:
        assert awake.held and awake.record() == {"held": True}
        assert _requested_us() == 0
    assert not awake.held
    assert _requested_us() == before


def test_a_host_that_refuses_it_gives_the_reason_and_nothing_is_held(tmp_path, caplog):
    with CpusAwake(tmp_path / "no-such-dir" / "cpu_dma_latency") as awake:
        assert not awake.held
        rec = awake.record()
        assert rec["held"] is False and "cannot open" in rec["reason"] and "No such file" in rec["reason"]
    assert "run.keep_cpus_awake" in caplog.text


def test_idle_states_read_the_cpuidle_driver_and_governor(tmp_path):
    (tmp_path / "current_driver").write_text("haltpoll\n")
    (tmp_path / "current_governor_ro").write_text("menu\n")
    got = idle_states(tmp_path)
    assert got["driver"] == "haltpoll" and got["governor"] == "menu"
    assert idle_states(tmp_path / "absent").keys() <= {"guest_halt_poll_ns"}


def test_the_setting_defaults_off_and_bench_does_not_ask_for_it():
    """Measured on bench.yaml it decided no more comparisons (docs/embedded.md, "Idle CPUs"), and
    on a laptop it would keep the CPUs out of their sleep states for the whole run."""
    assert load_matrix(REPO / "matrices" / "bench.yaml").run.keep_cpus_awake is False
    assert load_matrix(REPO / "tests" / "data" / "tiny.yaml").run.keep_cpus_awake is False
