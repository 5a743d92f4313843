"""Ours on FGD's protocol (replay.fgd_extender): every pod decided by the extender over HTTP
on a real Redis, as kube-scheduler's filters leave the nodes; hand-made clusters."""

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


def test_a_cpu_only_pod_goes_through_the_extender_to_a_node_it_strands_nothing_on(ours) -> None:
    # No GPU job yet (no mix): every node that fits is alike, ties to the lowest rank; n2
    # lacks the CPU.
    state = cluster([(10000, 65536, 2, "T4"), (64000, 65536, 2, "V100M32"),
                     (500, 65536, 1, "T4")])
    ours.reset(state)
    assert ours.choose(state, pod(cpu=1000, mem=1024)) == (0, ())
    state.rank = np.array([2, 1, 0])
    assert ours.choose(state, pod(cpu=1000, mem=1024)) == (1, ())
    state.rank = np.arange(3)
    # A half-GPU pod asking 4 cores on each of n0 and n1 makes the mix.
    for spec in ("T4", "V100M32"):
        half = pod(cpu=4000, num=1, milli=500, spec=spec, name=spec.lower())
        state.place(*ours.choose(state, half), half)
    # 3 cores more on n0 (10 cores, 4 taken) would leave 3: its free GPUs (150 % of one)
    # out of every such pod's reach. 2 cores leave 4: n0 is as good as n1, and ranks first.
    assert ours.choose(state, pod(cpu=3000, mem=1024)) == (1, ())
    assert ours.choose(state, pod(cpu=2000, mem=1024)) == (0, ())
    assert ours.decisions == 6


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
