"""dashboards/ssbench.json, as far as Grafana's schema can be checked here:

* what Grafana's file provisioning needs (a uid, a title, no instance id, panels on the 24-column
  grid, a Prometheus data-source variable every query uses);
* Grafana's own dashboard types (grafana-foundation-sdk, generated from Grafana's schema, with
  its panel and Prometheus query plugins): every key of the file survives a load and a dump, so
  none is unknown to the schema (a misspelled key would be dropped; a test shows it is caught);
* every query is PromQL that Prometheus's own parser accepts (``promtool check rules``) and names
  only metrics the endpoint exposes (harness.metrics.families.METRICS).

tests/metrics/test_prometheus.py runs every query against a real Prometheus after a real run.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess

import pytest
import yaml

from harness.metrics.families import exposed_names

from support.dashboard import APT, REPO, dashboard, queries, substitute


def test_what_grafana_provisioning_needs():
    d = dashboard()
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]) and d["title"]
    assert d.get("id") is None, "an instance's id: provisioning would clash with other dashboards"
    assert isinstance(d["schemaVersion"], int)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in d["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] >= 1 and g["x"] + g["w"] <= 24 and g["h"] >= 1, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"] and all(t["datasource"] == p["datasource"] for t in p["targets"]), p["title"]
            assert p.get("description"), p["title"]
    used = set(re.findall(r"\$(\w+)", json.dumps(d)))
    assert used <= set(variables) | {"__rate_interval"}, used


def _missing(a, b, path="") -> list[str]:
    """Paths of ``a`` that are not in ``b`` with the same value."""
    if isinstance(a, dict):
        out = []
        for k, v in a.items():
            out += [f"{path}/{k}"] if not isinstance(b, dict) or k not in b else _missing(v, b[k], f"{path}/{k}")
        return out
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [path]
        return [m for i, (x, y) in enumerate(zip(a, b)) for m in _missing(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}={a!r}"]


def grafana_round_trip(d: dict) -> dict:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()
    return json.loads(json.dumps(Dashboard.from_json(copy.deepcopy(d)), cls=JSONEncoder))


def test_every_key_is_in_grafanas_dashboard_schema():
    d = dashboard()
    assert _missing(d, grafana_round_trip(d)) == []


def test_the_schema_check_catches_a_key_grafana_does_not_know():
    d = dashboard()
    panel = next(p for p in d["panels"] if p["type"] == "timeseries")
    panel["options"]["legnd"] = panel["options"].pop("legend")
    panel["fieldConfig"]["defaults"]["custom"]["lineWdth"] = 1
    i = d["panels"].index(panel)
    assert set(_missing(d, grafana_round_trip(d))) >= {f"/panels[{i}]/options/legnd",
                                                        f"/panels[{i}]/fieldConfig/defaults/custom/lineWdth"}


def test_every_query_names_exposed_metrics_only():
    known = exposed_names()
    for title, expr in queries(dashboard()):
        names = set(re.findall(r"\bssbench_\w+", expr))
        assert names, (title, expr)
        assert names <= known, (title, names - known)
    variables = dashboard()["templating"]["list"]
    for v in variables[1:]:
        assert set(re.findall(r"\bssbench_\w+", v["query"]["query"])) <= known


def test_every_query_parses_as_promql(tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(f"promtool not found: {APT}")
    rules = {"groups": [{"name": "ssbench-dashboard", "rules": [
        {"record": f"ssbench_dashboard:q{i}", "expr": substitute(expr)}
        for i, (_, expr) in enumerate(queries(dashboard()))]}]}
    f = tmp_path / "rules.yml"
    f.write_text(yaml.safe_dump(rules))
    r = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "x:y", "expr": "sum by (a (b)"}]}]}))
    assert subprocess.run([promtool, "check", "rules", str(bad)], capture_output=True).returncode != 0


def test_the_provisioning_files_name_the_dashboard_and_a_prometheus_source():
    prov = REPO / "dashboards" / "provisioning"
    ds = yaml.safe_load((prov / "datasources.yaml").read_text())
    assert ds["apiVersion"] == 1 and ds["datasources"][0]["type"] == "prometheus"
    dash = yaml.safe_load((prov / "dashboards.yaml").read_text())
    assert dash["apiVersion"] == 1 and dash["providers"][0]["type"] == "file"
    promtool = shutil.which("promtool")
    if promtool is not None:
        r = subprocess.run([promtool, "check", "config", str(REPO / "dashboards" / "prometheus.yml")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
