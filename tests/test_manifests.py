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


def _documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _all_documents() -> dict[str, list[dict]]:
    return {p.relative_to(K8S).as_posix(): _documents(p) for p in sorted(K8S.rglob("*.yaml"))}


def _pod_specs(doc: dict) -> list[dict]:
    if doc.get("kind") in ("Deployment", "StatefulSet", "Job"):
        return [doc["spec"]["template"]["spec"]]
    return []


def test_every_manifest_parses_and_kustomization_lists_existing_files() -> None:
    docs = _all_documents()
    for name, documents in docs.items():
        if name not in ("volcano-scheduler.conf.yaml", "kustomization.yaml"):
            assert all(d.get("apiVersion") and d.get("kind") for d in documents), name
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource
    (generated,) = kustomization["configMapGenerator"]
    assert generated["files"] == ["scheduler-config.yaml"]
    mounted = [v["configMap"]["name"] for d in docs["scheduler.yaml"] for s in _pod_specs(d)
               for v in s["volumes"]]
    assert mounted == [generated["name"]]


def test_rbac_grants_exactly_the_verbs_used() -> None:
    (role,) = [d for d in _documents(K8S / "rbac.yaml") if d["kind"] == "ClusterRole"]
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {("pods", "get"), ("pods", "list"), ("pods", "watch"), ("pods", "patch"),
                       ("pods/binding", "create"), ("nodes", "get"), ("nodes", "list"),
                       ("nodes", "watch"), ("events", "create")}


def test_workloads_run_non_root_read_only_with_probes_and_requests() -> None:
    for name, docs in _all_documents().items():
        if name.startswith("examples/"):
            continue
        for spec in (s for d in docs for s in _pod_specs(d)):
            assert spec["securityContext"]["runAsNonRoot"] is True, name
            for container in spec["containers"]:
                ctx = container["securityContext"]
                assert ctx["readOnlyRootFilesystem"] is True and ctx["allowPrivilegeEscalation"] is False
                assert ctx["capabilities"]["drop"] == ["ALL"]
                assert "livenessProbe" in container and container["resources"]["requests"], name


def test_extender_deployment_uses_known_settings_modules_and_the_service_port() -> None:
    from extender import settings as settings_module

    docs = {d["kind"]: d for d in _documents(K8S / "extender.yaml")}
    (spec,) = _pod_specs(docs["Deployment"])
    containers = {c["name"]: c for c in spec["containers"]}
    from scripts.cli import COMMANDS

    assert containers["extender"]["command"] == ["schedtune", "serve"]
    assert containers["monitor"]["command"] == ["schedtune", "monitor"]
    assert COMMANDS["serve"][0] == "extender.__main__"
    assert COMMANDS["monitor"][0] == "extender.cluster.monitor"
    for container in containers.values():
        for env in container["env"]:
            assert env["name"] in settings_module.__doc__, env["name"]
    env = {e["name"]: e["value"] for e in containers["extender"]["env"]}
    from extender.settings import Settings

    Settings.from_env(env)  # every value is accepted
    assert containers["extender"]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    config = yaml.safe_load((K8S / "scheduler-config.yaml").read_text())
    service = docs["Service"]
    assert config["extenders"][0]["urlPrefix"] == (
        f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:"
        f"{service['spec']['ports'][0]['port']}")


def test_redis_persists_with_aof() -> None:
    (stateful,) = [d for d in _documents(K8S / "redis.yaml") if d["kind"] == "StatefulSet"]
    (container,) = stateful["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["--appendonly", "yes"]
    assert stateful["spec"]["volumeClaimTemplates"]


def test_examples_are_annotated_for_schedtune_scheduler_with_valid_demands() -> None:
    from estimator.feature_table import FeatureTable
    from extender.core.annotations import parse_demand
    from extender.model import PodInfo

    known = FeatureTable.load().models
    for path in sorted((K8S / "examples").glob("*.yaml")):
        (doc,) = _documents(path)
        template = doc["spec"]["template"]
        assert template["spec"]["schedulerName"] == "schedtune-scheduler"
        demand = parse_demand(PodInfo("uid", "pod", "default", template["metadata"]["annotations"]))
        assert demand is not None and demand.model in known, path.name
