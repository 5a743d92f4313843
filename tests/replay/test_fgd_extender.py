"""Ours on FGD's protocol (replay.fgd_extender): GPU pods decided by the extender over HTTP on
a real Redis, the rest as kube-scheduler's default scoring places them; hand-made clusters."""

from __future__ import annotations

import numpy as np
import pytest

from extender.state.store import RedisStore
from replay.fgd_cluster import ClusterState
from replay.fgd_extender import ExtenderOnFgd, share_annotation
from replay.fgd_protocol import run
from replay.fgd_workload import Pod, Pods, make_nodes


def pod(cpu=1000, mem=1024, num=0, milli=0, spec="", name="p") -> Pod:
    return Pod(name, cpu, mem, num, milli, spec)


def cluster(rows) -> ClusterState:
    """rows: (cpu_milli, memory_mib, gpus, model); ties to the lowest index."""
    state = ClusterState(make_nodes((f"n{i}", *r) for i, r in enumerate(rows)), seed=0)
    state.rank = np.arange(len(rows))
    return state


@pytest.fixture
def ours(redis_url):
    policy = ExtenderOnFgd(redis_url)
    yield policy
    policy.close()


def test_shares_are_whole_percents_of_the_gpu_rounded_up() -> None:
    assert [share_annotation(pod(num=1, milli=m)) for m in (470, 50, 1000, 125)] == \
        ["47%", "5%", "100%", "13%"]


def test_a_share_goes_through_the_extender_and_lands_where_it_fits(ours, redis_url) -> None:
    # n0: one T4 (15,360 MiB); n1: two G2 (unknown product, 32,768 MiB each).
    state = cluster([(32000, 65536, 1, "T4"), (32000, 65536, 2, "G2")])
    ours.reset(state)
    first = ours.choose(state, pod(num=1, milli=600))
    # Both idle, the same time everywhere: the tightest fit, the T4 (6,144 MiB left).
    assert first == (0, (0,))
    state.place(*first, pod(num=1, milli=600))
    store = RedisStore.from_url(redis_url)
    assert [j.reserved_mib for j in store.jobs()] == [60 * 15360 // 100]
    # gpu_spec allows only the T4 node, where 40 % is left: the pod fails, and leaves no
    # waiting pod behind to hold GPUs for it.
    assert ours.choose(state, pod(num=1, milli=600, spec="T4", name="q")) is None
    assert store.waiters(0.0) == ()
    # 40 % still fits there.
    assert ours.choose(state, pod(num=1, milli=400, spec="T4", name="r")) == (0, (0,))
    assert ours.decisions == 3 and ours.seconds > 0


def test_whole_gpu_pods_take_free_gpus_of_one_node(ours) -> None:
    state = cluster([(32000, 65536, 2, "G2"), (32000, 65536, 4, "G2")])
    ours.reset(state)
    choice = ours.choose(state, pod(num=3, milli=1000))
    assert choice is not None and choice[0] == 1 and len(set(choice[1])) == 3


def test_a_cpu_only_pod_goes_to_any_node_that_fits_without_the_extender(ours) -> None:
    # Our profile scores no node by CPU: n0, half its CPU used, is as good as n1 (ties to
    # the lowest rank, here n0); n2 lacks the CPU.
    state = cluster([(32000, 65536, 1, "T4"), (32000, 65536, 1, "T4"), (500, 65536, 1, "T4")])
    state.place(0, (), pod(cpu=16000, mem=0))
    ours.reset(state)
    assert ours.choose(state, pod(cpu=1000, mem=1024)) == (0, ())
    state.rank = np.array([2, 1, 0])
    assert ours.choose(state, pod(cpu=1000, mem=1024)) == (1, ())
    assert ours.decisions == 0  # the extender was not asked


def test_a_node_short_of_cpu_is_never_offered_to_the_extender(ours) -> None:
    state = cluster([(500, 65536, 1, "T4"), (32000, 65536, 1, "T4")])
    ours.reset(state)
    assert ours.choose(state, pod(cpu=1000, num=1, milli=500)) == (1, (0,))


def test_a_whole_run_never_places_beyond_a_gpus_milli(ours) -> None:
    """`run` checks every choice against the milli left: the extender's percent shares of
    memory must agree with it, shares that add to 100 % included."""
    state_nodes = make_nodes([("a", 64000, 262144, 2, "T4"), ("b", 64000, 262144, 1, "V100M32")])
    arrivals = Pods.of([(f"p{i}", 1000, 1024, 1, milli) for i, milli in
                        enumerate([470, 530, 250, 250, 500, 810, 190, 330, 330, 340, 1000])])
    curve = run(ours, state_nodes, arrivals, seed=3)
    # 3 GPUs = 3000 milli; the shares ask 5000: the first GPUs fill to the brim.
    assert curve.allocated_milli[-1] <= 3000 and curve.placed[:2].all()


def test_the_extenders_choice_stands_whatever_cpu_the_nodes_have_left(ours) -> None:
    """Two T4 nodes the extender prices alike: it gives the first 10 and the other 9. With
    our profile's CPU scorers off, the first stays kube-scheduler's choice when 90 % of its
    CPU is requested (LeastAllocated would have sent the pod to the other)."""
    state = cluster([(32000, 65536, 1, "T4"), (32000, 65536, 1, "T4")])
    ours.reset(state)
    assert ours.choose(state, pod(num=1, milli=300)) == (0, (0,))  # alike: the extender's
    busy = cluster([(32000, 65536, 1, "T4"), (32000, 65536, 1, "T4")])
    busy.place(0, (), pod(cpu=28800, mem=0))
    ours.reset(busy)
    assert ours.choose(busy, pod(num=1, milli=300)) == (0, (0,))


def test_a_gpu_model_the_trace_mapping_lacks_is_a_clear_error(ours) -> None:
    from replay.workloads import ReplayError

    with pytest.raises(ReplayError, match="GPU model 'H9000'"):
        ours.reset(cluster([(32000, 65536, 1, "H9000")]))
