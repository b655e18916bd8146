"""How a sender spec finds its module: the built-in kinds, or the spec's own ``module`` (the
plugin hook the test-only sleep sender uses; harness/ registers no test code by name)."""

from __future__ import annotations

import pytest

from harness.targets import base


def test_built_in_kinds_are_the_targets_only():
    assert base.SENDER_MODULES == {"embedded": "harness.targets.embedded.sender",
                                   "mssql": "harness.targets.mssql.sender"}


def test_a_spec_names_its_own_module():
    from support import sleep_sender

    spec = sleep_sender.spec("host=/nonexistent dbname=x", 0.01)
    assert spec["module"] == "support.sleep_sender"
    assert base.sender_factory(spec) is sleep_sender.open_sender


@pytest.mark.parametrize("spec", [{"kind": "sleep"}, {"kind": "nope", "module": "os; rm"}, {}])
def test_a_spec_without_a_loadable_module_is_refused(spec):
    with pytest.raises(ValueError, match="no module to load"):
        base.sender_factory(spec)
