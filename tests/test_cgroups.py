"""harness.cgroups: a process's CPU quota read from its real cgroups, and run.json's record of it
(provenance's host.cpu_quota). tools/slow-machine makes a real cgroup v1 or v2 quota."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cgroups

REPO = Path(__file__).resolve().parents[1]
CODE = ("import json; from harness import cgroups; from harness.provenance import host; "
        "q = cgroups.quota_of(); print(json.dumps([host()['cpu_quota'], q and q.usage_seconds()]))")


def test_no_quota_reads_none_and_a_quota_reads_its_cpus():
    """This process's own quota (none on a plain machine, or what the machine gives it) and a
    child's under a quota of 0.5 CPU: run.json records the child's, and its cgroup's CPU time
    reads. The test cannot set a quota without root or a delegated cgroup: it skips there."""
    here = cgroups.cpu_quota()
    assert here is None or here > 0
    r = subprocess.run([sys.executable, str(REPO / "tools" / "slow-machine"), "--cpus", "0.5", "--",
                        sys.executable, "-c", CODE], cwd=REPO, capture_output=True, text=True, timeout=120)
    if r.returncode == 2 and "no CPU quota can be set here" in r.stderr:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stderr
    quota, used = json.loads(r.stdout)
    assert quota == (0.5 if here is None else min(0.5, here)), r.stdout
    assert used is not None and used >= 0, r.stdout
