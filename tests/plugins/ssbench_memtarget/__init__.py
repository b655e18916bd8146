"""A third target for ssbench, in memory: a plugin package that registers itself.

Its distribution's metadata (``../ssbench_testplugins-1.0.dist-info/entry_points.txt``)
registers the target (``ssbench.targets``: ``memory``), its sender (``ssbench.senders``) and a
collector of its own (``ssbench.collectors``); ssbench finds them wherever ``tests/plugins`` is
on the path (``PYTHONPATH`` for the runner and its Locust workers), and nowhere else. Nothing
in ``harness/`` names it: ``ssbench run MATRIX --target memory`` runs it end to end
(tests/targets/test_third_target.py). docs/targets.md walks through it.

It emulates nothing of Service Broker's internals and measures nothing worth reporting: a SEND
is a message put in its initiator's transmission queue, held by a small TCP server in the
runner's process; once started, a thread moves the messages to the target queue and processes
them. Its accounting is exact, so the drain and the lost-message check are real.
"""
