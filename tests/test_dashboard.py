"""k8s/grafana-dashboard.json: well formed for Grafana, and every PromQL query names only
series the extender or the monitor exports (read from the code's own registry and from the
state collector run on a real Redis), and every exported metric is on a panel. The alert
expressions in docs/observability.md are held to the same names."""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric

from extender import metrics
from extender.core.interference import AlphaFit
from extender.model import FilterRecord, JobRecord, Limits, NodeGpus, PodDemand, Waiter
from extender.state.store import RedisStore

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "k8s" / "grafana-dashboard.json"
OBSERVABILITY = ROOT / "docs" / "observability.md"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# The series names a family exports, by type. Not `_created`: gunicorn's multi-process
# exposition (the extender's /metrics) has none.
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
# PromQL words that are not metric names (functions are told apart by their "(").
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
KEYWORDS = AGGREGATIONS | {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
LABEL_CLAUSES = {"by", "without", "on", "ignoring", "group_left", "group_right"}
TOKEN = re.compile(r"""
    (?P<skip>"(?:[^"\\]|\\.)*" | '(?:[^'\\]|\\.)*' | `[^`]*`       # strings
      | \{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\}         # label matchers
      | \[[^\]]*\]                                                 # ranges, subqueries
      | \$\{[^}]*\} | \$\w+                                        # Grafana variables
      | \d[\w.]* | \.\d[\w.]*                                      # numbers, durations
      | \s+)
  | (?P<name>[A-Za-z_:][\w:]*)
  | (?P<open>\()
  | (?P<other>.)
""", re.VERBOSE)


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects: identifiers that are not functions
    (followed by "("), keywords or label names (in `{...}` or a `by (...)`-style list)."""
    tokens = [(m.lastgroup, m.group()) for m in TOKEN.finditer(expr) if m.lastgroup != "skip"]
    names, i = set(), 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1][0] if i + 1 < len(tokens) else None
        if kind == "name" and text in LABEL_CLAUSES and following == "open":
            i = next(j for j in range(i, len(tokens)) if tokens[j][1] == ")")
        elif kind == "name" and following != "open" and text not in KEYWORDS | LABEL_CLAUSES:
            names.add(text)
        i += 1
    return names


def series(family: Metric) -> set[str]:
    return {family.name + suffix for suffix in SUFFIXES[family.type]}


@cache
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def targets(board: dict) -> list[tuple[str, str]]:
    """(panel title, expr) for every query of every panel."""
    return [(p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]


def unexported(board: dict, exported: set[str]) -> list[tuple[str, str]]:
    """(panel title, name) for each name a panel queries that nothing exports."""
    return sorted((title, name) for title, expr in targets(board)
                  for name in metric_names(expr) - exported)


@pytest.fixture
def families(store: RedisStore) -> list[Metric]:
    """Every metric family the service and the monitor export: the code's registry, plus the
    state collector on a Redis holding a layout, a job and a waiting pod."""
    store.put_node("n1", NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576))
    job = JobRecord(uid="j", pod="p", namespace="ml", model="resnet50", task="train", node="n1",
                    gpu_index=-1, reserved_mib=1000, predicted_s=60, state="reserved",
                    reserved_at=0)
    store.reserve(job, [(0, 24576.0, 4)], now=100, ttl_s=60)
    store.record_filter(FilterRecord(PodDemand("w", "w", "ml", "resnet50", "train", 32, 1)),
                        ttl_s=30, waiter=Waiter("w", 100, {"RTX-3090": (1.0, 1.0)}), now=100,
                        wait_ttl_s=60)
    store.set_alphas([AlphaFit("RTX-3090", 0.6, 12, 9)])
    state = list(metrics.StateCollector(store, Limits(4, {}), clock=lambda: 100).collect())
    assert all(family.samples for family in state)  # every family produced, none empty
    return [f for f in (*REGISTRY.collect(), *state) if f.name.startswith("schedtune_")]


@pytest.fixture
def exported(families: list[Metric]) -> set[str]:
    return {name for family in families for name in series(family)}


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (le, verb) (rate(a_bucket{verb="filter", le=~"0.5|1"}[5m]))', {"a_bucket"}),
    ("histogram_quantile(0.99, sum without (pod) (rate(a_bucket[$__rate_interval])))",
     {"a_bucket"}),
    ("max by (t) (b) / on (t) group_left max by (t) (c) offset 5m > bool 1e-3", {"b", "c"}),
    ('sum(increase(d_total{reason="x}y"}[${window}])) or vector(0)', {"d_total"}),
    ("count(e:rule) unless topk(3, f)", {"e:rule", "f"}),
])  # fmt: skip
def test_metric_names_are_the_selected_series(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_panels_query_the_templated_prometheus() -> None:
    board = dashboard()
    assert 36 <= board["schemaVersion"] <= 41 and board["uid"] and board["title"]
    (variable,) = board["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource", "datasource", "prometheus")
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert panel["datasource"] == DATASOURCE and panel["targets"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["expr"].strip()


def test_every_query_names_an_exported_series(exported: set[str]) -> None:
    assert unexported(dashboard(), exported) == []


def test_a_query_of_a_series_nobody_exports_is_caught(exported: set[str]) -> None:
    board = copy.deepcopy(dashboard())
    queries = board["panels"][0]["targets"]
    queries.append({**queries[0], "expr": "sum(rate(schedtune_binds_totl[5m]))"})
    queries.append({**queries[0], "expr": "rate(schedtune_extender_request_seconds[5m])"})
    title = board["panels"][0]["title"]
    assert unexported(board, exported) == [(title, "schedtune_binds_totl"),
                                           (title, "schedtune_extender_request_seconds")]


def test_every_exported_metric_is_on_a_panel(families: list[Metric]) -> None:
    shown = {name for _, expr in targets(dashboard()) for name in metric_names(expr)}
    assert sorted(f.name for f in families if not series(f) & shown) == []


def test_the_documented_alerts_name_exported_series(exported: set[str]) -> None:
    blocks = re.findall(r"```promql\n(.*?)```", OBSERVABILITY.read_text(), re.DOTALL)
    alerts = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert alerts and all(metric_names(expr) for expr in alerts)
    assert sorted({name for expr in alerts for name in metric_names(expr)} - exported) == []
