"""The endpoint's settings (what ``--metrics-*``, ``SSBENCH_METRICS_PORT`` and ``_HOST`` and the
web UI's login give), without the server: a command reads them before anything starts, and
``prometheus_client`` is imported only when the endpoint is on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

PORT_ENV = "SSBENCH_METRICS_PORT"
HOST_ENV = "SSBENCH_METRICS_HOST"


@dataclass(frozen=True)
class EndpointSettings:
    port: int                                   # 0: any free port
    host: str = "127.0.0.1"
    #: at the end, wait up to this long for every recent scraper's last scrape (when anything
    #: scraped at all), so the last repetition's final figures reach Prometheus
    linger_seconds: float = 30.0
    tls_cert: str | None = None
    tls_key: str | None = None
    #: off loopback, the web UI's login checked as HTTP basic auth: user, password -> ok
    login: Callable[[str, str], bool] | None = None

    @property
    def guarded(self) -> bool:
        return self.login is not None
