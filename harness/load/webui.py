"""Hooks for the Locust web UI (``ssbench web``). Inactive in headless runs."""

from __future__ import annotations


def add_arguments(parser) -> None:
    """Custom arguments shown in the web UI's start form (none outside ``ssbench web``)."""


def install(environment) -> None:
    """Extra web UI pages (only when a web UI runs)."""
