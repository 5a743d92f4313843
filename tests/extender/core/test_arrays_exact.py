"""The array paths decide bit for bit as the per-GPU and per-node code: policy costs, waits
until a job fits, scores, and the worker's GPU arrays as the store keeps them current."""

from __future__ import annotations

import random

import numpy as np
import pytest

from extender.core.filtering import decide_filter
from extender.core.fit_rows import MEMO_ENTRIES, fit_rows
from extender.core import gpu_table
from extender.core.gpu_table import GpuTable
from extender.core.job import PodJob
from extender.core.prioritizing import decide_scores
from extender.model import (
    GpuState, JobRecord, Limits, Need, NodeGpus, NodeState, PodDemand, QueuedJob,
)  # fmt: skip
from extender.policies import make_policy
from extender.policies.base import Placement, ScoringPolicy
from extender.policies.timeline import remaining_s, wait_until_fits_s
from extender.policies.timeline_arrays import remaining_s as remaining_array
from extender.policies.timeline_arrays import waits_until_fit_s
from extender.settings import Settings
from extender.state.gpu_arrays import SHAPES_KEPT, GpuArrays
from extender.state.queue_mirror import live_gpu


def _gpus(rng: random.Random, count: int, now: float) -> list[GpuState]:
    gpus = []
    for i in range(count):
        jobs = []
        for j in range(rng.choice([0, 1, 1, 2, 3, 5])):
            predicted = rng.choice([rng.uniform(0.1, 5000), float(rng.randrange(1, 4000)), 0.0])
            started = rng.choice([0.0, now - rng.uniform(0, 2 * predicted + 1), now + 5])
            jobs.append(QueuedJob(f"j{i}-{j}", rng.uniform(1, 9000), predicted, started))
        gpus.append(GpuState("n", i, 24576, tuple(jobs)))
    return gpus


def _matrices(gpus: list[GpuState], now: float) -> tuple[np.ndarray, np.ndarray]:
    width = max((len(g.jobs) for g in gpus), default=0)
    predicted = np.zeros((len(gpus), width))
    started = np.zeros((len(gpus), width))
    mib = np.zeros((len(gpus), width))
    for row, gpu in enumerate(gpus):
        for col, job in enumerate(gpu.jobs):
            predicted[row, col], started[row, col] = job.predicted_s, job.started_at
            mib[row, col] = job.reserved_mib
    return remaining_array(predicted, started, now), mib


@pytest.mark.parametrize("name", ["marginal", "shared", "paper", "settled"])
@pytest.mark.parametrize("alpha", [0.47, 0.0, 1.0, 0.13])
def test_policy_costs_on_arrays_equal_the_per_gpu_costs_exactly(name, alpha) -> None:
    rng, now = random.Random(f"{name}{alpha}"), 5000.0
    policy = make_policy(name, alpha)
    gpus = _gpus(rng, 400, now)
    remaining, _ = _matrices(gpus, now)
    assert remaining.tolist() == [[remaining_s(j, now) for j in g.jobs]
                                  + [0.0] * (remaining.shape[1] - len(g.jobs)) for g in gpus]
    work = np.array([rng.choice([rng.uniform(0.5, 3000), 60.0, 0.0]) for _ in gpus])
    expected = [policy.cost_s(g, w, now) for g, w in zip(gpus, work.tolist(), strict=True)]
    jobs = np.array([len(g.jobs) for g in gpus])  # those past their prediction included
    assert policy.costs_s(remaining, work, jobs=jobs).tolist() == expected
    assert ScoringPolicy.costs_s(policy, remaining, work, jobs=jobs).tolist() == expected


def test_waits_until_a_job_fits_on_arrays_equal_the_per_gpu_waits_exactly() -> None:
    rng, now = random.Random(7), 5000.0
    gpus = _gpus(rng, 500, now)
    remaining, mib = _matrices(gpus, now)
    need = np.array([rng.choice([1000.0, 9000.0, 20000.0, 30000.0]) for _ in gpus])
    limit = np.array([rng.choice([1, 2, 4]) for _ in gpus])
    got = waits_until_fit_s(remaining, mib, np.array([len(g.jobs) for g in gpus]),
                            np.array([g.free_mib for g in gpus]),
                            np.array([float(g.capacity_mib) for g in gpus]), need, limit, 0.47)
    expected = [wait_until_fits_s(g, n, int(lim), now, 0.47)
                for g, n, lim in zip(gpus, need.tolist(), limit.tolist(), strict=True)]
    assert got.tolist() == expected
    assert 0.0 in expected and np.inf in expected and len(set(expected)) > 50


def test_scores_on_arrays_equal_the_per_node_scores() -> None:
    rng = random.Random(3)
    policy = make_policy("marginal", 0.47)
    for _ in range(300):
        placements = {f"n{i}": Placement(rng.choice([100.0, 100.0, 100.0 * (1 + 1e-10),
                                                     rng.uniform(1, 900), 0.0]),
                                         rng.choice([5.0, 5.0, rng.uniform(0, 9)]))
                      for i in range(rng.randint(1, 12))}
        costs = np.array([p.cost_s for p in placements.values()])
        lefts = np.array([p.left_mib for p in placements.values()])
        assert dict(zip(placements, policy.score_array(costs, lefts).tolist(),
                        strict=True)) == policy.scores(placements)


LAYOUTS = [NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 4, 24576, 0),
           NodeGpus("Tesla-T4", "T4", 1, 15360, 1), NodeGpus("Mystery", None, 2, 20000, 2)]


def test_the_workers_arrays_follow_every_change_as_the_per_node_path_reads_it(
        store, monkeypatch) -> None:
    """Reservations made, started, confirmed, released and left to expire, in random order:
    after each step the names-mode snapshot (the arrays) shows the same node states and
    decides the same as the per-node path on the same Redis."""
    monkeypatch.setattr(gpu_table, "ARRAYS_FROM", 1)  # 12 nodes: over arrays all the same
    rng = random.Random(11)
    names = [f"node-{i}" for i in range(12)]
    for i, name in enumerate(names[:-1]):  # the last one: never seen by the watcher
        store.put_node(name, LAYOUTS[i % len(LAYOUTS)])
    settings = Settings(collocation=Limits(3, {"T4": 2}))
    needs = {"RTX-3090": Need(7000, 300), "T4": Need(5000, 200), "unknown": Need(9000, 400)}
    demand = PodDemand("p", "p", "ml", "resnet50", "train", 32, 1)
    # Node lists as kube-scheduler names them: all, the passing part, other orders; more
    # lists than a worker keeps shapes of, so kept and rebuilt tables are both compared.
    lists = [names, names[::-1], names[::2], names[1:7], rng.sample(names, 9), names[3:],
             names[:1]]
    assert len(lists) > SHAPES_KEPT
    now, live = 1000.0, []
    for step in range(160):
        now += rng.choice([0.0, 1.0, 20.0])
        action = rng.random()
        if action < 0.55 or not live:
            node = rng.choice(names[:-1])
            layout = LAYOUTS[names.index(node) % len(LAYOUTS)]
            uid = f"job-{step}"
            record = JobRecord(uid=uid, pod=uid, namespace="ml", model="m", task="train",
                               node=node, gpu_index=rng.randrange(layout.count),
                               reserved_mib=rng.choice([3000.0, 8000.0, 99999.0]),
                               predicted_s=rng.uniform(10, 900), state="reserved",
                               reserved_at=now)
            store.reserve(record, [(record.gpu_index, 1e9, 100)], now,
                          rng.choice([0.0, 15.0, 60.0]))
            live.append(uid)
        elif action < 0.75:
            store.mark_running(rng.choice(live), now - rng.uniform(0, 100))
        else:
            store.release(live.pop(rng.randrange(len(live))))
        chosen = rng.choice(lists)
        arrays = store.snapshot(dict.fromkeys(chosen), now)
        named = list(arrays.nodes)  # in the order its set was first named in: ties break so
        assert sorted(named) == sorted(chosen), f"step {step}: another set's table"
        per_node = store.snapshot(dict.fromkeys(named), now, vet=lambda claimed, seen: seen)
        assert isinstance(arrays.nodes, GpuTable) and not isinstance(per_node.nodes, GpuTable)
        assert dict(arrays.nodes.items()) == per_node.nodes, f"step {step}"
        for snapshot in (arrays, per_node):
            job = PodJob(demand, snapshot, needs)
            verdicts = decide_filter(job, dict.fromkeys(named), settings).verdicts
            scores = decide_scores(job, named, settings)
            if snapshot is arrays:
                expected = (verdicts, scores)
        assert (verdicts, scores) == expected, f"step {step}"


def test_prioritize_reuses_what_filter_found_for_the_pod_and_a_table_keeps_few() -> None:
    nodes = {f"n{i}": GpuState(f"n{i}", 0, 24576) for i in range(40)}
    one = NodeGpus("NVIDIA-GeForce-RTX-3090", "RTX-3090", 1, 24576)
    table = GpuTable.from_states({name: NodeState(name, one, (gpu,))
                                  for name, gpu in nodes.items()})
    limits = Limits(3, {})
    first = fit_rows(table, {"RTX-3090": Need(7000, 300)}, limits, {})
    assert fit_rows(table, {"RTX-3090": Need(7000, 300)}, limits, {}) is first
    for mib in range(10):
        fit_rows(table, {"RTX-3090": Need(float(mib), 300)}, limits, {})
    assert len(table.memo) <= MEMO_ENTRIES


def test_a_worker_keeps_the_tables_of_its_last_node_lists_until_a_queue_changes() -> None:
    """Filter's list and prioritize's (its passing part) alternate pod after pod: each
    keeps its table while nothing changed; the least recently named list is dropped."""
    layouts = {f"n{i}": LAYOUTS[i % len(LAYOUTS)] for i in range(10)}
    arrays = GpuArrays(layouts, {}, 0.0, live_gpu)
    lists = [[f"n{i}" for i in range(k, 10)] for k in range(SHAPES_KEPT + 1)]
    tables = [arrays.table(named, 1.0) for named in lists[:SHAPES_KEPT]]
    assert [arrays.table(list(named), 1.0) for named in lists[:SHAPES_KEPT]] == tables
    assert all(again is table for again, table in
               zip([arrays.table(named, 1.0) for named in lists[:SHAPES_KEPT]], tables))
    arrays.table(lists[-1], 1.0)  # one list more: the least recently named one goes
    assert arrays.table(lists[0], 1.0) is not tables[0]
    assert arrays.table(lists[-1], 1.0) is arrays.table(lists[-1], 1.0)
    arrays.mark("n3", 0)  # a queue changed: every list is read afresh
    assert arrays.table(lists[1], 1.0) is not tables[1]


def test_a_node_set_named_in_another_order_is_the_same_table_and_the_same_decisions(
        store) -> None:
    """kube-scheduler lists the nodes as its parallel filters finish, a new order each pod:
    the set's table (in its first order) serves every order, and filter and prioritize
    answer each node as they do for the first order."""
    names = [f"node-{i}" for i in range(40)]
    for i, name in enumerate(names):
        store.put_node(name, LAYOUTS[i % len(LAYOUTS)])
    rng = random.Random(3)
    for i in range(12):  # some GPUs busy, so nodes differ
        node = rng.choice(names)
        record = JobRecord(uid=f"j{i}", pod=f"j{i}", namespace="ml", model="m", task="train",
                           node=node, gpu_index=0, reserved_mib=rng.choice([3000.0, 8000.0]),
                           predicted_s=rng.uniform(10, 900), state="reserved", reserved_at=0.0)
        store.reserve(record, [(0, 1e9, 100)], 0.0, 0.0)
    settings = Settings(collocation=Limits(3, {"T4": 2}))
    needs = {"RTX-3090": Need(7000, 300), "T4": Need(5000, 200), "unknown": Need(9000, 400)}
    demand = PodDemand("p", "p", "ml", "resnet50", "train", 32, 1)
    first = store.snapshot(dict.fromkeys(names), 10.0)
    job = PodJob(demand, first, needs)
    expected = (dict(decide_filter(job, dict.fromkeys(names), settings).verdicts.items()),
                dict(decide_scores(job, names, settings).items()))
    for _ in range(5):
        order = rng.sample(names, len(names))
        snapshot = store.snapshot(dict.fromkeys(order), 10.0)
        assert snapshot.nodes is first.nodes and list(snapshot.nodes) == names
        job = PodJob(demand, snapshot, needs)
        assert (dict(decide_filter(job, dict.fromkeys(order), settings).verdicts.items()),
                dict(decide_scores(job, order, settings).items())) == expected


def test_job_columns_compacted_while_a_gpu_gains_jobs_keep_every_gpus_jobs(
        monkeypatch) -> None:
    """Compaction runs in the middle of recomputing a GPU whose queue grew: that GPU's old
    slots are not read as if they held its new jobs (an IndexError past the columns' end,
    found replaying a 320-GPU world), and every other GPU keeps its own jobs."""
    monkeypatch.setattr("extender.state.gpu_arrays.FIRST_SLOTS", 8)
    layouts = {f"n{i}": LAYOUTS[0] for i in range(3)}  # 12 GPUs
    rng = random.Random(5)
    queues: dict[tuple[str, int], tuple[QueuedJob, ...]] = {}
    arrays = GpuArrays(layouts, queues, 0.0, live_gpu)
    for step in range(200):
        key = (f"n{rng.randrange(3)}", rng.randrange(4))
        jobs = queues.get(key, ())
        if jobs and rng.random() < 0.3:
            jobs = jobs[1:]
        else:
            jobs += (QueuedJob(f"j{step}", rng.uniform(1, 900), 100.0, 0.0),)
        queues[key] = jobs
        arrays.mark(*key)
        table = arrays.table(list(layouts), 1.0)
        for node, index in [(f"n{n}", g) for n in range(3) for g in range(4)]:
            row = 4 * int(node[1:]) + index
            start, count = int(table.job_start[row]), int(table.gpu_jobs[row])
            assert table.jobs.uid[start:start + count] == [j.uid for j in
                                                            queues.get((node, index), ())]
