"""The endpoint's settings (what ``--metrics-*`` and the ``SSBENCH_METRICS_PORT``, ``_HOST`` and
``_TOKEN`` variables give), without the server: a command reads them before anything starts, and
``prometheus_client`` is imported only when the endpoint is on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

TOKEN_ENV = "SSBENCH_METRICS_TOKEN"
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
    token: str | None = None                    # bearer token
    login: Callable[[str, str], bool] | None = None   # basic auth: user, password -> ok

    @property
    def guarded(self) -> bool:
        return bool(self.token or self.login)
