"""``ssbench web``: the Locust web UI for interactive runs, with live broker metrics.

* :mod:`harness.web.launcher`: the ``ssbench web`` process (target, master, workers, Ctrl-C).
* :mod:`harness.web.session`: one interactive session (swarm start..stop) as a saved run.
* :mod:`harness.web.control`: the private loopback API the Locust master calls.
* :mod:`harness.web.metrics`: live broker metrics from the collectors' samples.
* :mod:`harness.web.locust_plugin`: the hooks inside the Locust master and workers.
"""
