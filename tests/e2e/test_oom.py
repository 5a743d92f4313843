"""GPU OOMs behind the real kube-scheduler: the kubelet's report of a container that ran
out of GPU memory (its termination message) raises that job type's floor for its
namespace; an OOMKilled container (RAM) raises none; one namespace's kills never lock
other namespaces out of the job type."""

from __future__ import annotations

from extender.model import RESERVED_MIB, job_type
from tests.e2e.cluster import wait_for

TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 "
             "has a total capacity of 22.49 GiB of which 412.00 MiB is free.")
# One job type per test: floors are shared state, and two namespaces' kills of one type
# raise everyone's floor.
JOB = {"model": "resnet50", "task": "train", "batch": 64, "epochs": 1}
KIND = job_type("resnet50", "train", 64, "A10")
OTHER_JOB = {**JOB, "batch": 48}
OTHER_KIND = job_type("resnet50", "train", 48, "A10")


def _run_and_fail(cluster, namespace: str, selector: dict, terminated: dict,
                  job: dict = JOB) -> float:
    """A pod of the job bound, then reported Failed as `terminated` says; its reservation."""
    pod = cluster.new_pod(namespace, node_selector=selector, **job)
    name = pod["metadata"]["name"]
    cluster.create(pod)
    cluster.wait_bound(namespace, name)
    reserved = float(cluster.read(namespace, name)["metadata"]["annotations"][RESERVED_MIB])
    cluster.set_phase(namespace, name, "Failed", terminated)
    wait_for(f"{name}'s reservation released",
             lambda: not [j for j in cluster.reservations() if j.pod == name])
    return reserved


def test_a_cuda_oom_raises_its_namespaces_floor_and_an_oomkilled_does_not(
        cluster, namespace, gpu_pool):
    selector = gpu_pool({"A10": 1}, replicas=4)
    _run_and_fail(cluster, namespace, selector, {"reason": "OOMKilled", "exitCode": 137})
    assert f"{namespace}|{KIND}" not in cluster.store.floors()
    reserved = _run_and_fail(cluster, namespace, selector,
                             {"reason": "Error", "exitCode": 1, "message": TORCH_OOM})
    floors = wait_for("the namespace's floor", lambda: cluster.store.floors().get(
        f"{namespace}|{KIND}"))
    assert floors > reserved
    retry = cluster.new_pod(namespace, node_selector=selector, **JOB)
    cluster.create(retry)
    cluster.wait_bound(namespace, retry["metadata"]["name"])
    notes = cluster.read(namespace, retry["metadata"]["name"])["metadata"]["annotations"]
    assert float(notes[RESERVED_MIB]) >= floors - 1


def test_seven_gpu_oom_kills_in_one_namespace_leave_another_namespace_placeable(
        cluster, namespace, gpu_pool):
    selector = gpu_pool({"A10": 1}, replicas=4)
    first = None
    for _ in range(7):  # a Job with backoffLimit: 6, its pods killed one after another
        reserved = _run_and_fail(cluster, namespace, selector,
                                 {"reason": "Error", "exitCode": 1, "message": TORCH_OOM},
                                 OTHER_JOB)
        first = first or reserved
    floors = cluster.store.floors()
    assert OTHER_KIND not in floors  # one namespace's kills: nobody else's floor
    assert floors[f"{namespace}|{OTHER_KIND}"] <= 23028  # never past the A10's memory
    other = f"{namespace}-b"
    cluster.ensure_namespace(other)
    pod = cluster.new_pod(other, node_selector=selector, **OTHER_JOB)
    cluster.create(pod)
    cluster.wait_bound(other, pod["metadata"]["name"])
    notes = cluster.read(other, pod["metadata"]["name"])["metadata"]["annotations"]
    assert abs(float(notes[RESERVED_MIB]) - first) <= 1  # its own estimate, unfloored
    cluster.delete_pod(other, pod["metadata"]["name"])
