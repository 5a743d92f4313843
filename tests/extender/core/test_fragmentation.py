"""extender/core/fragmentation.py: FGD's fragmentation measure on GPU tables worked out by
hand, and the tie-break it gives prioritize (EXTENDER_TIE_BREAK=fragmentation)."""

from __future__ import annotations

import numpy as np
import pytest

from extender.core.fragmentation import cpu_delta, placement_delta, request_mix
from extender.core.gpu_table import GpuTable
from extender.core.prioritizing import score_nodes, spare_gpu_scores
from extender.model import ClusterSnapshot, GpuState, Limits, Need, NodeGpus, NodeState, QueuedJob
from extender.policies.drain import Drain

T4 = NodeGpus("Tesla-T4", "T4", 2, 10000, share_slots=0)  # 10,000 MiB: 1 % = 100 MiB


def node(name: str, *shares: tuple[int, ...]) -> NodeState:
    """A two-GPU node; `shares`: per GPU, the percents its jobs hold."""
    gpus = tuple(GpuState(name, i, 10000, tuple(QueuedJob(f"{name}-{i}-{k}", 100.0 * pct, 600.0)
                                                 for k, pct in enumerate(jobs)))
                 for i, jobs in enumerate(shares))
    return NodeState(name, T4, gpus)


def test_the_mix_is_the_common_shares_of_the_jobs_held() -> None:
    # 10 jobs: six at 50 %, three at 25 %, one at 10 %. 95 % of 10 is 9.5: the 10 % level
    # is still needed to reach it (50 and 25 cover 9), so all three stay.
    table = GpuTable.from_states({"a": node("a", (50, 50), (25, 25)),
                                  "b": node("b", (50, 50), (25, 10)),
                                  "c": node("c", (50,), (50,))})
    mix = request_mix(table)
    assert mix.levels.tolist() == [10, 25, 50]
    assert mix.freq.tolist() == pytest.approx([0.1, 0.3, 0.6])


def test_a_rare_share_beyond_the_coverage_is_left_out() -> None:
    states = {f"n{i}": node(f"n{i}", (50,), (50,)) for i in range(10)}  # 20 jobs at 50 %
    states["odd"] = node("odd", (7,), ())  # and one at 7 %: 1 in 21, under 5 %
    assert request_mix(GpuTable.from_states(states)).levels.tolist() == [50]


FULL = {f"m{i}": node(f"m{i}", (50, 50), (50, 50)) for i in range(10)}  # mix: 50 % only


def test_delta_by_hand() -> None:
    # Mix: only 50 % jobs. Node a: GPU 0 has 60 % free, GPU 1 idle (100 %). A 20 % job on
    # GPU 0 leaves 40 %, which no 50 % job can use: fragmentation 0 -> 40 (GPU 1 can still
    # take one, so only GPU 0's 40 counts). On GPU 1 it leaves 80 %, usable: 0 -> 0.
    table = GpuTable.from_states({"a": node("a", (40,), ()), **FULL})
    limit = np.full(len(table.gpu_free), 10)
    rows = np.array([0, 1])
    delta = placement_delta(table, rows, np.array([2000.0, 2000.0]), limit,
                            request_mix(table))
    assert delta.tolist() == pytest.approx([40.0, 0.0])


def test_a_node_nothing_of_the_mix_fits_counts_all_its_free_share() -> None:
    # Mix: 50 % jobs only. Node a: GPU 0 60 % free, GPU 1 30 % free. Before: GPU 0 takes a
    # 50 % job, so only GPU 1's 30 strands. A 20 % job on GPU 0 leaves 40 and 30: nothing
    # fits, all 70 strands: +40. On GPU 1 (10 left): 60 still takes one; 10 strands: -20.
    table = GpuTable.from_states({"a": node("a", (40,), (70,)), **FULL})
    limit = np.full(len(table.gpu_free), 10)
    delta = placement_delta(table, np.array([0, 1]), np.array([2000.0, 2000.0]), limit,
                            request_mix(table))
    assert delta.tolist() == pytest.approx([40.0, -20.0])


def test_a_gpu_at_its_collocation_limit_takes_no_more() -> None:
    # GPU 0 holds one job and may hold two: after a second, its 30 % left is stranded.
    table = GpuTable.from_states({"a": node("a", (20,), ()), "m": node("m", (25,), (25,))})
    mix = request_mix(table)  # 20 % and 25 % levels
    with_room = placement_delta(table, np.array([0]), np.array([5000.0]),
                                np.full(len(table.gpu_free), 10), mix)
    at_limit = placement_delta(table, np.array([0]), np.array([5000.0]),
                               np.full(len(table.gpu_free), 2), mix)
    assert with_room[0] == pytest.approx(0.0) and at_limit[0] == pytest.approx(30.0)


def _scores(states: dict[str, NodeState], tie_break: str) -> dict[str, float]:
    # Ten full nodes of 50 % jobs make the mix: 50 % only (the test nodes' few jobs < 5 %).
    snapshot = ClusterSnapshot(0.0, {**states, **FULL})
    need = {"T4": Need(2000.0, 600.0)}  # a 20 % job
    scores = score_nodes(snapshot, need, Limits(10, {}), Drain(alpha=0.0), tie_break=tie_break)
    return {name: scores[name] for name in states}


def _chosen(scores: dict[str, float]) -> str:
    return max(scores, key=scores.get)  # the first of the highest, as kube-scheduler's


def test_prioritize_breaks_a_tie_by_fragmentation_instead_of_best_fit() -> None:
    # With no slowdown from sharing, every GPU costs the job alone: all tie.
    # "roomy": GPU 0 60 % free, GPU 1 idle; the job on GPU 0 (best fit) leaves 40 %, which
    # no 50 % job can use: +40. "idle": the job on GPU 0 leaves 80 %: 0. Best fit takes
    # roomy (the least memory left), fragmentation takes idle.
    states = {"roomy": node("roomy", (40,), ()), "idle": node("idle", (), ())}
    assert _chosen(_scores(states, "best-fit")) == "roomy"
    assert _chosen(_scores(states, "fragmentation")) == "idle"
    # "tight": GPU 0 30 % free (stranded already: its GPU 1 takes the 50s); the job fills
    # it to 10 %: -20. Both pick it, fragmentation because it fills a fragment.
    states["tight"] = node("tight", (70,), ())
    assert _chosen(_scores(states, "best-fit")) == "tight"
    assert _chosen(_scores(states, "fragmentation")) == "tight"


def test_times_that_differ_come_before_fragmentation() -> None:
    # Drain at alpha 0.5: the busy GPUs cost more than an idle one, so "idle" wins on time
    # even under best fit, and fragmentation has no tie to break.
    states = {"tight": node("tight", (70,), (60,)), "idle": node("idle", (), ())}
    snapshot = ClusterSnapshot(0.0, {**states, **FULL})
    for tie_break in ("best-fit", "fragmentation"):
        scores = score_nodes(snapshot, {"T4": Need(2000.0, 600.0)}, Limits(10, {}),
                             Drain(alpha=0.5), tie_break=tie_break)
        assert scores["idle"] == 1.0 and scores["tight"] < 1.0


def test_among_equal_fragmentation_the_tightest_fit_is_in_shares_of_a_gpu() -> None:
    # Mix: whole GPUs only (40 full cards; the two shares are under 5 % of the jobs). A 20 % job on "t4" (half
    # used, 15,360 MiB) or on "big" (60 % used, 32,768 MiB) fills a fragment the same:
    # -20 both. Left after it: 30 % of the T4 (4,608 MiB), 20 % of the big card (6,553
    # MiB). In MiB the T4 is tighter, in shares the big card: fragmentation takes that.
    t4 = NodeGpus("Tesla-T4", "T4", 1, 15360, share_slots=0)
    big = NodeGpus("Alibaba-G2", None, 1, 32768, share_slots=0)
    states = {
        "t4": NodeState("t4", t4, (GpuState("t4", 0, 15360, (QueuedJob("a", 7680.0, 600.0),)),)),
        "big": NodeState("big", big, (GpuState("big", 0, 32768,
                                                (QueuedJob("b", 19661.0, 600.0),)),)),
        **{f"w{i}": NodeState(f"w{i}", t4, (GpuState(f"w{i}", 0, 15360,
                                                     (QueuedJob(f"w{i}", 15360.0, 600.0),)),))
           for i in range(40)},
    }
    needs = {"T4": Need(3072.0, 600.0, declared_mib=3072.0, declared_percent=20),
             "unknown": Need(6553.0, 600.0, declared_mib=6553.0, declared_percent=20)}
    snapshot = ClusterSnapshot(0.0, states)
    by_fit = score_nodes(snapshot, needs, Limits(10, {}), Drain(alpha=0.0))
    by_fragmentation = score_nodes(snapshot, needs, Limits(10, {}), Drain(alpha=0.0),
                                   tie_break="fragmentation")
    assert by_fit["t4"] == 1.0 and by_fit["big"] < 1.0
    assert by_fragmentation["big"] == 1.0 and by_fragmentation["t4"] < 1.0


def _whole(name: str, free: int, busy_uid: str = "") -> NodeState:
    """A four-GPU node: `free` idle GPUs, the others held whole by one job (`busy_uid`)."""
    layout = NodeGpus("Tesla-T4", "T4", 4, 10000, share_slots=0)
    gpus = tuple(GpuState(name, i, 10000, () if i < free else
                          (QueuedJob(busy_uid or f"{name}-job", 10000.0, 600.0),))
                 for i in range(4))
    return NodeState(name, layout, gpus)


def test_a_job_on_several_gpus_is_one_kind_of_the_mix() -> None:
    # Ten nodes each with one job on two whole GPUs: one kind, 2 GPUs at 100 %, not 20
    # one-GPU jobs.
    table = GpuTable.from_states({f"n{i}": _whole(f"n{i}", 2) for i in range(10)})
    mix = request_mix(table)
    assert (mix.gpus.tolist(), mix.levels.tolist(), mix.freq.tolist()) == ([2], [100], [1.0])


def test_a_pair_of_whole_gpus_is_kept_for_the_pairs_to_come() -> None:
    # Mix: pods on two whole GPUs (the one-GPU job on "three" is under 5 % of the jobs).
    # A pod on two GPUs: on "three" (3 idle) it leaves one idle GPU no pair can use (+100 %
    # of a GPU stranded); on "four" (4 idle) a pair stays (0). Best fit takes the tighter
    # "three"; fragmentation keeps the pair.
    states = {"three": _whole("three", 3), "four": _whole("four", 4),
              **{f"m{i}": _whole(f"m{i}", 2) for i in range(30)}}
    table = GpuTable.from_states(states)
    rows = np.array([table.row_of("three", 0), table.row_of("three", 1),
                     table.row_of("four", 0), table.row_of("four", 1)])
    delta = placement_delta(table, rows, np.full(4, 10000.0), np.full(len(table.gpu_free), 10),
                            request_mix(table), owner=np.array([0, 0, 1, 1]), placements=2)
    assert delta.tolist() == pytest.approx([100.0, 0.0])
    snapshot = ClusterSnapshot(0.0, states)
    need = {"T4": Need(10000.0, 600.0, gpus=2)}
    for tie_break, chosen in (("best-fit", "three"), ("fragmentation", "four")):
        scores = score_nodes(snapshot, need, Limits(10, {}), Drain(alpha=0.0),
                             tie_break=tie_break)
        assert _chosen({n: scores[n] for n in ("three", "four")}) == chosen


def _with_cpu(name: str, cpu_milli: int, *shares: tuple[int, ...], job_cpu: float = 4000.0
              ) -> NodeState:
    """`node`, its layout stating `cpu_milli` allocatable CPU (0: not known), each job's pod
    asking `job_cpu` millicores."""
    layout = NodeGpus("Tesla-T4", "T4", 2, 10000, share_slots=0, cpu_milli=cpu_milli)
    gpus = tuple(GpuState(name, i, 10000, tuple(
        QueuedJob(f"{name}-{i}-{k}", 100.0 * pct, 600.0, cpu_milli=job_cpu)
        for k, pct in enumerate(jobs))) for i, jobs in enumerate(shares))
    return NodeState(name, layout, gpus)


# Mix: 50 % jobs asking 4 cores each (twenty of them on ten nodes of 64 cores).
CPU_FULL = {f"c{i}": _with_cpu(f"c{i}", 64000, (50,), (50,)) for i in range(10)}


def test_a_kind_asks_the_median_cpu_of_its_jobs() -> None:
    mix = request_mix(GpuTable.from_states(CPU_FULL))
    assert (mix.levels.tolist(), mix.gpus.tolist(), mix.cpu.tolist()) == ([50], [1], [4000])
    # Six 50 % jobs asking 1, 2, 4, 4, 8 and 100 cores are one kind asking 4; two 25 %
    # jobs asking 1 and 2 cores one asking 1.5.
    layout = NodeGpus("Tesla-T4", "T4", 1, 10000, share_slots=0, cpu_milli=64000)
    jobs = [(50, 1), (50, 2), (50, 4), (50, 4), (50, 8), (50, 100), (25, 1), (25, 2)]
    states = {f"n{i}": NodeState(f"n{i}", layout, (GpuState(f"n{i}", 0, 10000, (
        QueuedJob(f"j{i}", 100.0 * pct, 600.0, cpu_milli=1000.0 * cores),)),))
        for i, (pct, cores) in enumerate(jobs)}
    mix = request_mix(GpuTable.from_states(states))
    assert dict(zip(mix.levels.tolist(), mix.cpu.tolist(), strict=True)) == {25: 1500, 50: 4000}


def test_a_node_left_short_of_cpu_strands_all_its_free_share() -> None:
    # Node "short": 10 cores, one 50 % job asking 4 on GPU 0. A 20 % job asking 4 more
    # leaves 2 cores: no 50 % job (4 cores) fits any more, so the node's free share (30 %
    # of GPU 0 and GPU 1's 100 %: 130) all strands, where before only nothing did: +130.
    # Its job on GPU 1 instead: the same (the CPU is the node's). With the node's CPU not
    # known, only the GPU counts: on GPU 0 it leaves 30 % (+30), on GPU 1 80 % (0).
    for cpu, expected in ((10000, [130.0, 130.0]), (0, [30.0, 0.0])):
        table = GpuTable.from_states({"short": _with_cpu("short", cpu, (50,), ()),
                                      **CPU_FULL})
        delta = placement_delta(table, np.array([0, 1]), np.array([2000.0, 2000.0]),
                                np.full(len(table.gpu_free), 10), request_mix(table),
                                job_cpu=4000.0)
        assert delta.tolist() == pytest.approx(expected)


def test_prioritize_keeps_the_node_whose_cpu_still_takes_the_common_kind() -> None:
    # "few" (12 cores) and "many" (64 cores) hold the same GPUs: a 50 % job each. A 20 %
    # job asking 4 cores leaves "few" 4 cores: one more 50 % job still fits, so it ties;
    # asking 6 cores it leaves 2, and "few"'s GPUs strand: fragmentation takes "many".
    states = {"few": _with_cpu("few", 12000, (50,), ()),
              "many": _with_cpu("many", 64000, (50,), ())}
    snapshot = ClusterSnapshot(0.0, {**states, **CPU_FULL})
    need = {"T4": Need(2000.0, 600.0)}
    for job_cpu, best in ((4000.0, {"few", "many"}), (6000.0, {"many"})):
        scores = score_nodes(snapshot, need, Limits(10, {}), Drain(alpha=0.0),
                             tie_break="fragmentation", job_cpu=job_cpu)
        top = max(scores[n] for n in states)
        assert {n for n in states if scores[n] == top} == best


def test_a_pod_asking_no_gpu_strands_a_node_only_by_its_cpu() -> None:
    # Mix: 50 % jobs asking 4 cores. "short" (10 cores, a 50 % job asking 4 on GPU 0, GPU
    # 1 idle): 6 cores left, so a pod asking 3 cores and no GPU leaves 3: no 50 % job fits
    # any more and the 150 % free strands (before: 0, GPU 0's 50 % still takes one): +150.
    # Asking 2 cores it leaves 4: 0. "roomy" (64 cores): 0 either way. A full node: nothing
    # free to strand. The node's CPU not known: never short.
    states = {"short": _with_cpu("short", 10000, (50,), ()),
              "roomy": _with_cpu("roomy", 64000, (50,), ()),
              "unknown": _with_cpu("unknown", 0, (50,), ())}
    table = GpuTable.from_states({**states, **CPU_FULL})
    limit = np.full(len(table.gpu_free), 10)
    for job_cpu, short in ((3000.0, 150.0), (2000.0, 0.0)):
        delta = cpu_delta(table, limit, request_mix(table), job_cpu)
        assert delta.tolist() == pytest.approx([short] + [0.0] * (len(delta) - 1))


def test_prioritize_keeps_a_pod_asking_no_gpu_off_the_gpus_it_would_strand() -> None:
    # "short" would strand its free GPUs (above); "roomy", a node without GPUs and the
    # full nodes would not: they keep the top score together, "short" falls below it.
    states = {"short": _with_cpu("short", 10000, (50,), ()),
              "roomy": _with_cpu("roomy", 64000, (50,), ()),
              "cpu-only": NodeState("cpu-only", None, ())}
    snapshot = ClusterSnapshot(0.0, {**states, **CPU_FULL})
    scores = spare_gpu_scores(snapshot, Limits(10, {}), 3000.0)
    assert scores["roomy"] == scores["cpu-only"] == scores["c0"] == 1.0
    # +150 % of a GPU: FGD's score int(100 sigmoid(-1.5)) = 18, over the best's 50.
    assert scores["short"] == pytest.approx(18 / 50)
    assert spare_gpu_scores(snapshot, Limits(10, {}), 2000.0)["short"] == 1.0
