"""Targets, senders and collectors by name, through entry points (harness.targets.registry):
ssbench's own are registered exactly as a plugin's would be (pyproject.toml), a plugin is found
from the metadata on the path (tests/plugins), and what ``--target`` names is chosen from them
(harness.targets.factory)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from harness.errors import UserError
from harness.targets import factory, registry
from harness.targets.base import SendPaths, Sender
from harness.targets.sender import open_sender, sender_class, sender_factory
from support import PLUGINS_DIR

BUILT_IN_COLLECTORS = ["activation", "broker", "broker_waits", "cpu_speed", "cross_cpu", "dialogs", "host", "locks",
                       "page_latch", "queues", "session_waits", "stalls", "storage", "throughput", "waits"]


@pytest.fixture
def plugins(monkeypatch):
    """The test plugins on this process's path (as PYTHONPATH puts them for subprocesses)."""
    monkeypatch.syspath_prepend(str(PLUGINS_DIR))
    importlib.invalidate_caches()


def test_ssbench_registers_its_own():
    assert registry.names(registry.TARGETS) == ["embedded", "mssql"]
    assert registry.names(registry.SENDERS) == ["embedded", "mssql"]
    assert registry.names(registry.COLLECTORS) == BUILT_IN_COLLECTORS
    from harness.targets.embedded.sender import EmbeddedSender
    from harness.targets.embedded.target import EmbeddedTarget

    assert factory.target_class("embedded") is EmbeddedTarget
    assert sender_class({"sender": "embedded"}) is EmbeddedSender


def test_a_plugin_on_the_path_registers_itself(plugins):
    from support import sleep_sender

    assert "memory" in registry.names(registry.TARGETS)
    assert {"memory", "sleep", "flaky"} <= set(registry.names(registry.SENDERS))
    assert registry.names(registry.COLLECTORS) == sorted(BUILT_IN_COLLECTORS + ["memory_backlog"])
    spec = sleep_sender.spec("host=/nonexistent dbname=x", 0.01)
    assert sender_factory(spec) == sleep_sender.SleepSender.from_spec


def test_the_plugin_is_registered_nowhere_else():
    assert "memory" not in registry.names(registry.TARGETS)
    with pytest.raises(UserError, match=r"no sender is registered as 'sleep' \(registered: embedded, mssql"):
        open_sender({"sender": "sleep"})


def test_a_sender_outside_any_distribution_is_named_by_its_import_path():
    """A benchmark's sender needs no metadata: ``module:Class`` imports it from the path."""
    from support import sleep_sender

    assert "sleep" not in registry.names(registry.SENDERS)
    assert sender_class({"sender": "support.sleep_sender:SleepSender"}) is sleep_sender.SleepSender
    with pytest.raises(UserError, match=r"sender 'no_such_module:X': module 'no_such_module' cannot be imported"):
        sender_class({"sender": "no_such_module:X"})
    with pytest.raises(UserError, match=r"module 'support.sleep_sender' has no 'Nothing'"):
        sender_class({"sender": "support.sleep_sender:Nothing"})
    with pytest.raises(TypeError, match="is not a Sender subclass"):
        sender_class({"sender": "support.sleep_sender:spec"})


@pytest.mark.parametrize("spec", [{"kind": "embedded"}, {"sender": ""}, {"sender": 3}, {}])
def test_a_spec_without_a_sender_name_is_refused(spec):
    with pytest.raises(ValueError, match="a sender spec names its sender"):
        sender_factory(spec)


def test_two_distributions_registering_one_name_are_refused(tmp_path, monkeypatch):
    for dist, value in (("one", "a.b:C"), ("two", "x.y:Z")):
        d = tmp_path / f"ssbench_{dist}-1.0.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ssbench-{dist}\nVersion: 1.0\n")
        (d / "entry_points.txt").write_text(f"[ssbench.senders]\nclash = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserError, match="two senders are registered as 'clash'"):
        registry.entry_points(registry.SENDERS)


def test_send_paths_are_declared_and_checked_when_the_class_is_defined():
    """The load layer reads ``paths``; a class declaring a path it does not implement is refused
    at once, not when a swarm first takes that path."""
    with pytest.raises(TypeError, match="declares the pump SEND path but does not implement pump"):
        class Liar(Sender):  # noqa: F841
            paths = SendPaths(pump=True)
    from harness.targets.embedded.sender import EmbeddedSender
    from harness.targets.mssql.sender import MssqlSender

    assert EmbeddedSender.paths == SendPaths(pump=True)
    assert MssqlSender.paths == SendPaths()


# --------------------------------------------------------------------------- --target

def test_target_names_and_arguments(tmp_path, plugins):
    assert factory.choose("embedded") == ("embedded", None)
    assert factory.choose("memory") == ("memory", None)
    topo = tmp_path / "lab.yaml"
    topo.write_text("name: x\n")
    assert factory.choose(str(topo)) == ("mssql", str(topo))          # the one target that opens files
    assert factory.choose(f"mssql:{topo}") == ("mssql", str(topo))
    with pytest.raises(UserError, match="the embedded target takes no argument"):
        factory.choose("embedded:x")
    with pytest.raises(UserError, match="did you mean 'embedded'"):
        factory.choose("embeded")
    with pytest.raises(UserError, match=r"'nope.yaml': no such file, nor a registered target \('embedded', 'memory'"):
        factory.choose("nope.yaml")
    with pytest.raises(UserError, match="the mssql target needs a topology file"):
        factory.target_config("mssql")


def test_a_target_config_is_read_without_connecting(plugins):
    config = factory.target_config("memory")
    assert (config.name, config.profiles, config.file) == ("memory", ("default",), None)
    assert config.capabilities.features() == frozenset() and config.alias_profiles() is None
    embedded = factory.target_config("embedded")
    assert embedded.capabilities.features() == {"backlog", "dialog_lifetime", "transport_rate_limit",
                                                "client_cpu_per_send", "alternate"}
    assert embedded.alias_profiles() == ["durable", "delayed"]


def test_a_matrix_using_what_a_target_lacks_is_refused_at_its_line(tmp_path, plugins):
    from harness.matrix import load_matrix

    m = tmp_path / "m.yaml"
    m.write_text(textwrap.dedent("""\
        name: t
        axes:
          initiators: [1]
          threads: [1]
          dialogs: [per_thread]
          payload_bytes: [100]
          server: [default]
          messages_per_dialog: [unlimited, 10]
        """))
    with pytest.raises(UserError, match=r"m.yaml:8: axes.messages_per_dialog\[1\]: the memory target does not retire"):
        factory.target_config("memory").check_matrix(load_matrix(m))
    m.write_text(m.read_text().replace("  messages_per_dialog: [unlimited, 10]\n", "run:\n  backlog_messages: 100\n"))
    with pytest.raises(UserError, match=r"m.yaml:9: run.backlog_messages: the memory target does not turn activation off"):
        factory.target_config("memory").check_matrix(load_matrix(m))


def test_the_registry_follows_the_path(plugins, monkeypatch):
    """Entry points are read per sys.path: a plugin put on the path later is seen."""
    assert "memory" in registry.names(registry.TARGETS)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(PLUGINS_DIR)])
    assert "memory" not in registry.names(registry.TARGETS)
