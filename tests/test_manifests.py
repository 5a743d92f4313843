"""The shipped scheduler configurations parse and use the v1 field names and types."""

from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parent.parent / "k8s"
EXTENDER_FIELDS = {"urlPrefix": str, "filterVerb": str, "prioritizeVerb": str, "bindVerb": str,
                   "weight": int, "enableHTTPS": bool, "nodeCacheCapable": bool,
                   "httpTimeout": str, "ignorable": bool, "managedResources": list}


def test_kube_scheduler_configuration_v1() -> None:
    config = yaml.safe_load((K8S / "scheduler-config.yaml").read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["profiles"][0]["schedulerName"] == "schedtune-scheduler"
    (extender,) = config["extenders"]
    assert set(extender) <= set(EXTENDER_FIELDS)
    for key, value in extender.items():
        assert isinstance(value, EXTENDER_FIELDS[key]), key
    assert 1 <= extender["weight"] <= 100  # the scheduler rejects weights outside (0, 100]
    assert extender["nodeCacheCapable"] is True
    for resource in extender["managedResources"]:
        assert set(resource) == {"name", "ignoredByScheduler"}


def test_volcano_snippet_names_our_verbs() -> None:
    config = yaml.safe_load((K8S / "volcano-scheduler.conf.yaml").read_text())
    plugins = [p for tier in config["tiers"] for p in tier["plugins"]]
    (ext,) = [p for p in plugins if p["name"] == "extender"]
    args = ext["arguments"]
    assert args["extender.urlPrefix"].endswith("/volcano")
    assert {args[k] for k in ("extender.predicateVerb", "extender.prioritizeVerb",
                              "extender.allocateFuncVerb", "extender.deallocateFuncVerb")} == {
        "predicate", "prioritize", "allocate", "deallocate"}
