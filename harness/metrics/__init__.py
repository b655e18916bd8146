"""Live metrics where users already watch: a Prometheus/OpenMetrics endpoint (docs/monitoring.md).

``ssbench run``, ``bench``, ``saturate`` and ``web`` start one with ``--metrics-port`` (or
``$SSBENCH_METRICS_PORT``); it is off by default and on loopback by default.

* :mod:`.live`: the state behind the endpoint, fed by the repetition
  (:class:`harness.repetition.Repetition`) from the results' own sources: the sampler's ticks,
  the Locust master's merge of the workers' recorders (its live figures) and the committed
  summary;
* :mod:`.families`: that state as Prometheus metric families (``prometheus_client``);
  :data:`~.families.METRICS` lists every metric;
* :mod:`.server`: the HTTP endpoint (token or login off loopback, TLS); :mod:`.settings` its
  settings (``prometheus_client`` is imported only when the endpoint is on).

Layers: this package sits above the load and the collectors (it reads their messages and
samples) and below the repetition, the runner, the web UI and the commands, which start it and
feed it.
"""

from __future__ import annotations

import time
from typing import Callable

from .live import LiveState, RepetitionFeed
from .settings import EndpointSettings


class Metrics:
    """One command's endpoint: its :class:`LiveState` (``live``, what the runner and the
    repetitions feed) and its server."""

    def __init__(self, settings: EndpointSettings, command: str):
        from .server import Endpoint

        self.settings = settings
        self.live = LiveState(command=command)
        self.endpoint = Endpoint(self.live, settings)

    def start(self) -> "Metrics":
        self.endpoint.start()
        return self

    @property
    def url(self) -> str:
        return self.endpoint.url

    def close(self, say: Callable[[str], None] = lambda text: None, linger: bool = True) -> None:
        """Stop serving; first, if anything has scraped the endpoint, wait up to the linger
        time for one more scrape, so the last repetition's final figures are collected."""
        end = time.time()
        if linger and self.settings.linger_seconds > 0 and self.endpoint.last_scrape is not None:
            say(f"waiting up to {self.settings.linger_seconds:g} s for a last scrape of {self.url}")
            self.endpoint.wait_for_scrape(end, self.settings.linger_seconds)
        self.endpoint.close()

