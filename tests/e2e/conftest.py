"""The end-to-end tier: a real etcd, kube-apiserver and kube-scheduler (v1.36.2), and the
project's processes as `k8s/` runs them, started once per test run.

Every test of this directory is marked `e2e` and grouped on one pytest-xdist worker
(`xdist_group`), so the tier starts once per Redis mode (`cluster`: one Redis, then
Redis Sentinel). Without `../shared/k8s` (or etcd) its tests skip
with one message. Logs of every process are kept under the session's temporary
directory; a failing test prints where they are and the tail of each. Figures a test
measures (`measured` fixture) are printed in the terminal summary (tests/conftest.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from estimator.catalogue import CATALOGUE
from tests.conftest import FIGURE_PREFIX
from tests.e2e import binaries
from tests.e2e.cluster import Cluster, wait_for
from tests.e2e.control_plane import ControlPlane
from tests.e2e.deployment import Deployment, Manifests
from tests.e2e.pki import ControlPlanePki, identities
from tests.e2e.processes import Supervisor

POOL_LABEL = "e2e.schedtune.io/pool"
_LOGS: list[Path] = []
_STARTUP_RECORDED: list[bool] = []


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own reads the group
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.xdist_group("e2e"))


@pytest.fixture(scope="session", params=[(), ("redis-ha",)], ids=["redis", "sentinel"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Cluster]:
    """The tier, once with k8s/ as it is (one Redis) and once with the k8s/redis-ha
    component (the master that Redis Sentinel names): every e2e test runs on both."""
    reason = binaries.missing_reason()
    if reason is not None:
        pytest.skip(f"end-to-end tier skipped: {reason}")
    workdir = tmp_path_factory.mktemp("e2e")
    supervisor = Supervisor(workdir / "logs")
    _LOGS.append(supervisor.log_dir)
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = round(time.monotonic() - started - sum(phases.values()), 2)

    try:
        manifests = Manifests(binaries.unpacked(), workdir, ("gang-scheduling", *request.param))
        phase("unpack_and_render_s")
        pki = ControlPlanePki(workdir / "pki", identities(manifests.service_accounts))
        control_plane = ControlPlane(supervisor, manifests.binaries, workdir, pki)
        control_plane.start()
        phase("etcd_and_apiserver_s")
        deployment = Deployment(supervisor, control_plane, manifests)
        deployment.apply_rbac(control_plane.api_client())
        deployment.start()
        phase("project_and_scheduler_s")
        phases["total_s"] = round(time.monotonic() - started, 2)
        yield Cluster(supervisor, control_plane, deployment, phases)
    finally:
        supervisor.stop_all()


@pytest.fixture
def namespace(cluster: Cluster, record_property) -> Iterator[str]:  # noqa: ANN001
    """A namespace of the test's own; its pods are deleted afterwards."""
    if not _STARTUP_RECORDED:
        _STARTUP_RECORDED.append(True)
        record_property(f"{FIGURE_PREFIX}tier start-up", cluster.startup_s)
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    cluster.ensure_namespace(name)
    yield name
    for pod in cluster.pods(name):
        cluster.delete_pod(name, pod["metadata"]["name"])


@pytest.fixture
def gpu_pool(cluster: Cluster) -> Iterator[Callable[..., dict[str, str]]]:
    """`gpu_pool({"T4": 2, "A100-80GB": 1}, gpus_per_node=2, replicas=4)`: GPU nodes of
    those GPU types (counts of nodes; `replicas`: time-slicing's, GPU Feature Discovery's
    `nvidia.com/gpu.replicas`) with a label of the test's own, once the node watcher has
    their layouts; returns the node selector that keeps a test's pods on them. The nodes
    are deleted afterwards."""
    made: list[str] = []

    def make(types: dict[str, int], gpus_per_node: int = 1, replicas: int | None = None,
             **extra) -> dict[str, str]:  # noqa: ANN003
        pool = uuid.uuid4().hex[:6]
        selector = {POOL_LABEL: pool}
        for gpu_type, nodes in types.items():
            product = CATALOGUE[gpu_type].products[0]
            for i in range(nodes):
                name = f"{pool}-{gpu_type.lower()}-{i}"
                cluster.add_gpu_node(name, product, gpus_per_node,
                                     CATALOGUE[gpu_type].memory_mib, replicas, labels=selector,
                                     **extra)
                made.append(name)
        for name in made:
            wait_for(f"the node watcher's layout of {name}", lambda: cluster.layout_known(name))
        return selector

    yield make
    for name in made:
        cluster.delete_node(name)


@pytest.fixture
def measured(record_property):  # noqa: ANN001, ANN201
    """`measured(name, value)`: a figure the test measured, shown in the terminal summary
    (carried in the report's properties, so it reaches the summary under pytest-xdist)."""
    return lambda name, value: record_property(f"{FIGURE_PREFIX}{name}", value)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and "cluster" in getattr(item, "fixturenames", ()) and _LOGS:
        tails = []
        for log in sorted(_LOGS[-1].glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-15:]
            tails.append(f"--- {log.name} (last {len(lines)} lines)\n" + "\n".join(lines))
        report.sections.append(("e2e process logs", f"all logs in {_LOGS[-1]}\n" +
                                "\n".join(tails)))
