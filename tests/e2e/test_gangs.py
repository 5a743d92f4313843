"""Gangs behind the real kube-scheduler with in-tree gang scheduling (GenericWorkload,
GangScheduling, k8s/gang-scheduling): placed whole on one GPU type, two gangs that do not fit
together, a member lost mid-plan; and a Volcano PodGroup through the Volcano verbs."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from kubernetes import client

from extender.model import GANG, GANG_SIZE
from extender.state.gang_store import plan_key
from extender.wire.volcano import encode_job_info, encode_node_info, encode_task_info
from tests.e2e.cluster import Cluster, wait_for
from tests.e2e.control_plane import https_get

WORKLOADS = "scheduling.k8s.io/v1alpha2"  # v1.36's in-tree gang API
TRAINING = {"model": "resnet50", "task": "train", "batch": 32, "epochs": 1}


def _in_tree_gang(cluster: Cluster, namespace: str, name: str, size: int) -> None:
    """A Workload of one gang template and its PodGroup (minCount `size`)."""
    gang = {"gang": {"minCount": size}}
    cluster.create_object(WORKLOADS, "workloads", namespace, {
        "apiVersion": WORKLOADS, "kind": "Workload", "metadata": {"name": name},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": gang}]}})
    cluster.create_object(WORKLOADS, "podgroups", namespace, {
        "apiVersion": WORKLOADS, "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"podGroupTemplateRef": {"workload": {"workloadName": name,
                                                      "podGroupTemplateName": "workers"}},
                 "schedulingPolicy": gang}})


def _members(cluster: Cluster, namespace: str, gang: str, size: int,
             selector: dict[str, str]) -> list[str]:
    names = []
    for i in range(size):
        pod = cluster.new_pod(namespace, name=f"{gang}-{i}", node_selector=selector, **TRAINING)
        pod["spec"]["schedulingGroup"] = {"podGroupName": gang}
        cluster.create(pod)
        names.append(pod["metadata"]["name"])
    return names


def _placeholders(cluster: Cluster, namespace: str, gang: str) -> list[str]:
    return [j.uid for j in cluster.reservations()
            if j.uid.startswith(f"gang:{namespace}/{gang}/")]


def _gpu_types(cluster: Cluster, namespace: str, names: list[str]) -> set[str]:
    jobs = {j.pod: j for j in cluster.reservations() if j.namespace == namespace}
    return {jobs[name].gpu_type for name in names}


def test_a_four_pod_gang_is_placed_whole_on_one_gpu_type(cluster, namespace, gpu_pool,
                                                         measured):
    # 4 T4s on one node, or 4 A100s on two: the plan weighs the all-reduce across nodes
    # against the faster cards (the A100s win by far for resnet50).
    t4_pool = gpu_pool({"T4": 1}, gpus_per_node=4)
    a100_pool = gpu_pool({"A100-80GB": 2}, gpus_per_node=2)
    _in_tree_gang(cluster, namespace, "ddp", 4)
    started = time.monotonic()
    names = []
    for i in range(4):  # both pools' nodes are offered
        pod = cluster.new_pod(namespace, name=f"ddp-{i}", **TRAINING)
        pod["spec"]["schedulingGroup"] = {"podGroupName": "ddp"}
        pod["spec"]["affinity"] = _either(t4_pool, a100_pool)
        cluster.create(pod)
        names.append(pod["metadata"]["name"])
    nodes = [cluster.wait_bound(namespace, name, timeout_s=60) for name in names]
    measured("4-pod gang created to all bound (s)", round(time.monotonic() - started, 2))
    assert _gpu_types(cluster, namespace, names) == {"A100-80GB"}, nodes
    assert len(set(nodes)) == 2 and _placeholders(cluster, namespace, "ddp") == []
    gpus = {(j.node, j.gpu_index) for j in cluster.reservations() if j.pod in names}
    assert len(gpus) == 4  # one GPU each


def _either(*selectors: dict[str, str]) -> dict[str, Any]:
    """Node affinity: a node of any one of the pools."""
    terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [v]}
                                   for k, v in s.items()]} for s in selectors]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}


def test_two_gangs_that_fit_alone_not_together_one_runs_then_the_other(
        cluster, namespace, gpu_pool, measured):
    selector = gpu_pool({"A100-80GB": 1}, gpus_per_node=4)
    for gang in ("first", "second"):
        _in_tree_gang(cluster, namespace, gang, 3)
    first = _members(cluster, namespace, "first", 3, selector)
    time.sleep(0.5)
    second = _members(cluster, namespace, "second", 3, selector)
    wait_for("one gang bound whole", lambda: any(
        all(cluster.bound_node(namespace, n) for n in gang) for gang in (first, second)),
        timeout_s=60)
    calls = _filter_calls(cluster)
    time.sleep(5)  # the other gang's retries meanwhile (backing off: SchedulerPopFromBackoffQ off)
    measured("filter calls in 5 s for a gang that does not fit", _filter_calls(cluster) - calls)
    bound = {name: cluster.bound_node(namespace, name) for name in first + second}
    placed, waiting = (first, second) if bound[first[0]] else (second, first)
    assert all(bound[n] for n in placed) and not any(bound[n] for n in waiting), bound
    waiting_gang = waiting[0].rsplit("-", 1)[0]
    assert _placeholders(cluster, namespace, waiting_gang) == []  # nothing held partially
    ended = time.monotonic()
    for name in placed:
        cluster.set_phase(namespace, name, "Succeeded")
    for name in placed:
        cluster.delete_pod(namespace, name)
    for name in waiting:
        cluster.wait_bound(namespace, name, timeout_s=120)
    measured("second gang bound after the first ended (s)", round(time.monotonic() - ended, 2))
    assert len(_gpu_types(cluster, namespace, waiting)) == 1


def _filter_calls(cluster: Cluster) -> int:
    """Filter requests the extender has answered (its /metrics, every worker)."""
    cert, key, ca = cluster.deployment.scheduler_client_cert()
    status, body = https_get(cluster.deployment.extender_url("/metrics"), ca, cert=(cert, key))
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith('schedtune_extender_request_seconds_count{verb="filter"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_a_gang_member_deleted_mid_plan_releases_the_plan(cluster, namespace, gpu_pool):
    # Our own gang annotations, no gang scheduler: members bind as they come, the plan holds
    # the GPUs of those still to come until it loses a member.
    selector = gpu_pool({"A100-80GB": 1}, gpus_per_node=4)
    names = []
    for i in range(2):  # 2 of its 3 members
        pod = cluster.new_pod(namespace, name=f"solo-{i}", node_selector=selector, **TRAINING)
        pod["metadata"]["annotations"].update({GANG: "solo", GANG_SIZE: "3"})
        cluster.create(pod)
        names.append(pod["metadata"]["name"])
    for name in names:
        cluster.wait_bound(namespace, name)
    assert len(_placeholders(cluster, namespace, "solo")) == 1  # the third member's GPU
    cluster.delete_pod(namespace, names[1])
    # The monitor releases the plan and the deleted member's reservation one after the
    # other: wait for both.
    wait_for("the plan and the deleted member released",
             lambda: not _placeholders(cluster, namespace, "solo")
             and not cluster.redis.exists(plan_key(f"{namespace}/solo"))
             and [j.pod for j in cluster.reservations() if j.namespace == namespace]
             == [names[0]] or None)


VOLCANO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}  # the shape of Volcano's CRD (config/crd/volcano/bases), its schema left open


@pytest.fixture(scope="module")
def volcano_podgroups(cluster) -> None:
    extensions = client.ApiextensionsV1Api(cluster.control_plane.api_client())
    try:
        extensions.create_custom_resource_definition(VOLCANO_CRD)
    except client.exceptions.ApiException as exc:
        if exc.status != 409:
            raise
    wait_for("the PodGroup CRD served", lambda: _served(cluster), timeout_s=30)


def _served(cluster: Cluster) -> bool | None:
    try:
        cluster.objects.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1",
                                                      "default", "podgroups")
        return True
    except client.exceptions.ApiException:
        return None


def test_a_volcano_podgroup_gang_through_the_volcano_verbs(cluster, namespace, gpu_pool,
                                                           volcano_podgroups):
    selector = gpu_pool({"T4": 1, "A100-80GB": 1}, gpus_per_node=2)
    cluster.create_object("scheduling.volcano.sh/v1beta1", "podgroups", namespace, {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "vc"}, "spec": {"minMember": 2}})
    pods = []
    for i in range(2):  # Volcano's pods: its scheduler places them, kube-scheduler ignores them
        pod = cluster.new_pod(namespace, name=f"vc-{i}", scheduler="volcano", **TRAINING)
        pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = "vc"
        pods.append(cluster.create(pod))
    nodes = [n for n in cluster.api.list_node(label_selector=_label(selector),
                                              _preload_content=False).json()["items"]]
    volcano = _VolcanoClient(cluster)
    allowed = {}
    for pod in pods:
        for node in nodes:
            answer = volcano.post("/volcano/predicate", {"task": encode_task_info(pod),
                                                         "node": encode_node_info(node)})
            allowed[pod["metadata"]["name"], node["metadata"]["name"]] = answer["code"] == 0
    chosen = {pod: node for (pod, node), ok in allowed.items() if ok}
    assert sorted(chosen) == ["vc-0", "vc-1"] and len(set(chosen.values())) == 1, allowed
    node = next(iter(chosen.values()))
    assert "a100" in node  # both members on the faster type's node
    job = {"job": encode_job_info(namespace, "vc", 2)}
    assert volcano.post("/volcano/jobReady", job) == {"status": False}
    for pod in pods:
        volcano.post("/volcano/allocate", {"task": encode_task_info(pod, node)})
    assert volcano.post("/volcano/jobReady", job) == {"status": True}
    for pod in pods:
        cluster.bind(namespace, pod["metadata"]["name"], node)
    wait_for("the monitor confirmed both", lambda: all(
        j.expires_at == 0 for j in cluster.reservations() if j.namespace == namespace
    ) and len([j for j in cluster.reservations() if j.namespace == namespace]) == 2 or None)


def _label(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in selector.items())


class _VolcanoClient:
    """Volcano's extender plugin's part (its TLS sidecar's client certificate)."""

    def __init__(self, cluster: Cluster) -> None:
        deployment = cluster.deployment
        secrets = deployment.manifests.k8s_dir / "secrets"
        self.cert = (str(secrets / "volcano.crt"), str(secrets / "volcano.key"))
        self.ca = str(secrets / "ca.crt")
        self.url = deployment.extender_url

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = requests.post(self.url(path), json=body, cert=self.cert, verify=self.ca,
                               timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()

