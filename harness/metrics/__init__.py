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
