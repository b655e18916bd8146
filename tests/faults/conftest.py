"""Fixtures of the fault suite (helpers in conftest_faults.py)."""

from conftest_faults import fault  # noqa: F401
