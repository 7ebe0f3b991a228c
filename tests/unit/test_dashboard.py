"""The Grafana dashboard and the alert rules in deploy/ cannot drift from the code: every metric they
query is one the app exports, and every metric the app exports is on the dashboard."""

import json
import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

from app.observability.endpoint import DatabaseStateCollector

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "memwarden.json"
ALERTS = DEPLOY / "prometheus" / "memwarden-alerts.yaml"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def _exported() -> dict[str, set[str]]:
    """Family name -> the series names Prometheus sees for it, for every Memwarden metric."""
    import app.observability.metrics  # noqa: F401  (registers the metrics)

    families = [f for f in REGISTRY.collect() if f.name.startswith("memwarden_")]
    families += DatabaseStateCollector(None).describe()
    return {f.name: {f.name + suffix for suffix in SUFFIXES[f.type]} for f in families}


def _queried() -> set[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    return {name for expr in exprs for name in re.findall(r"\bmemwarden_[a-z_]+", expr)}


def test_every_metric_the_dashboard_queries_is_exported():
    series = set().union(*_exported().values())
    unknown = _queried() - series
    assert not unknown, f"the dashboard queries metrics the app does not export: {sorted(unknown)}"


def test_every_exported_metric_is_on_the_dashboard():
    queried = _queried()
    missing = [family for family, names in _exported().items() if not names & queried]
    assert not missing, f"metrics missing from deploy/grafana/memwarden.json: {missing}"


def test_every_metric_is_in_the_metrics_page():
    page = (DASHBOARD.parents[2] / "docs" / "operators" / "metrics-and-alerts.md").read_text()
    for family, names in _exported().items():
        assert any(f"`{name}" in page for name in {family, *names}), \
            f"{family} is not described in docs/operators/metrics-and-alerts.md"


def test_every_alert_queries_exported_metrics_with_their_labels():
    series = set().union(*_exported().values())
    rules = [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]
    assert {"MemwardenReviewQueueBackingUp", "MemwardenAuditCheckpointNotWitnessed"} <= {r["alert"] for r in rules}
    for rule in rules:
        names = set(re.findall(r"\bmemwarden_[a-z_]+", rule["expr"]))
        assert names and names <= series, (rule["alert"], names - series)
