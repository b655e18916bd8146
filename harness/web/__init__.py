"""``ssbench web``: the Locust web UI for interactive runs, with live broker metrics.

* :mod:`harness.web.launcher`: the ``ssbench web`` process (target, the swarm, Ctrl-C).
* :mod:`harness.web.session`: each swarm the web UI starts, as a saved run of one permutation.
* :mod:`harness.web.form`: the start form's fields and defaults.
* :mod:`harness.web.metrics`: live broker metrics from the collectors' samples.
* :mod:`harness.web.locust_plugin`: the web UI's pages on the Locust master.

The swarm itself (master, workers, messages) is :mod:`harness.load`'s, the same as a headless run's.
"""
