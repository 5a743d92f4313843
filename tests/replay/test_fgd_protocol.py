"""FGD's evaluation protocol (replay.fgd_protocol, replay.fgd_policies) on tiny hand-made
clusters whose right answers are worked out by hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from replay.fgd_cluster import ClusterState, feasible
from replay.fgd_policies import (
    FGD,
    BestFit,
    DotProduct,
    Fragmentation,
    GpuClustering,
    GpuPacking,
    RandomFit,
    TargetWorkload,
    make_policy,
)
from replay.fgd_protocol import Curve, figure_at, run, run_protocol
from replay.fgd_workload import Pod, Pods, load_trace, make_nodes, sample_workload
from replay.workloads import ReplayError

TRACE = Path(__file__).resolve().parent.parent / "data" / "openb"


def pod(cpu=1000, mem=1024, num=0, milli=0, spec="", name="p") -> Pod:
    return Pod(name, cpu, mem, num, milli, spec)


def cluster(rows, rank=None, placed=()) -> ClusterState:
    """rows: (cpu_milli, memory_mib, gpus, model); placed: (node, gpus, pod) already there."""
    state = ClusterState(make_nodes((f"n{i}", *r) for i, r in enumerate(rows)), seed=0)
    state.rank = np.array(rank if rank is not None else range(len(rows)))
    for node, gpus, p in placed:
        state.place(node, gpus, p)
    return state


def test_best_fit_takes_the_tightest_node_and_the_fullest_gpu_that_fits() -> None:
    # n0 GPUs left [600, 1000] (1600 in all), n1 [250, 1000] (1250): same CPU left.
    state = cluster([(32000, 65536, 2, "G2")] * 2, rank=[0, 1],
                    placed=[(0, (0,), pod(cpu=0, num=1, milli=400)),
                            (1, (0,), pod(cpu=0, num=1, milli=750))])
    # 200 milli: n1 is left tighter (1050 vs 1400 milli); its GPU 0 (250 left) is fullest.
    assert BestFit().choose(state, pod(num=1, milli=200)) == (1, (0,))
    # 300 milli no longer fits GPU 0 of n1: still n1 (1250 - 300 < 1600 - 300), GPU 1.
    assert BestFit().choose(state, pod(num=1, milli=300)) == (1, (1,))
    # 700 milli: n1 has only the whole GPU 1; n0's GPU 0 (600) is too small too.
    assert BestFit().choose(state, pod(num=1, milli=700)) == (1, (1,))


def test_fgd_avoids_a_fragment_the_target_workload_cannot_use() -> None:
    # Target workload: only 500-milli pods. n0: one free GPU; n1: one GPU with 700 left.
    target = TargetWorkload.from_pods(Pods.of([("t", 1000, 1024, 1, 500)]))
    state = cluster([(32000, 65536, 1, "T4")] * 2, rank=[1, 0],
                    placed=[(1, (0,), pod(cpu=0, num=1, milli=300))])
    incoming = pod(num=1, milli=300)
    # On n1 the GPU would keep 400 < 500: all 400 stranded (score int(sigmoid(-0.4)*100) =
    # 40); on n0 it keeps 700, still fit for a 500 pod: no fragment (score 50).
    fgd = FGD(target)
    fgd.reset(state)
    assert fgd.choose(state, incoming) == (0, (0,))
    assert BestFit().choose(state, incoming) == (1, (0,))  # best fit strands the 400
    # With a 400-milli target the same move on n1 leaves a usable 400: ties at 50 and the
    # lower rank (n1) wins.
    fgd = FGD(TargetWorkload.from_pods(Pods.of([("t", 1000, 1024, 1, 400)])))
    fgd.reset(state)
    assert fgd.choose(state, incoming) == (1, (0,))


def test_fgd_picks_the_gpu_inside_the_node_that_strands_least() -> None:
    # One node, GPUs left [1000, 600]; target: 500-milli pods. A 200 pod on GPU 1 leaves
    # 400 stranded; on GPU 0 it leaves 800 and 600, both usable.
    target = TargetWorkload.from_pods(Pods.of([("t", 1000, 1024, 1, 500)]))
    state = cluster([(32000, 65536, 2, "G2")], placed=[(0, (1,), pod(cpu=0, num=1, milli=400))])
    fgd = FGD(target)
    fgd.reset(state)
    assert fgd.choose(state, pod(num=1, milli=200)) == (0, (0,))
    assert BestFit().choose(state, pod(num=1, milli=200)) == (0, (1,))


def test_fragmentation_by_hand() -> None:
    # Half the target asks no GPU (counts every idle milli), half asks 500 milli.
    target = TargetWorkload.from_pods(Pods.of([("c", 2000, 1, 0, 0), ("g", 2000, 1, 1, 500)]))
    state = cluster([(32000, 65536, 2, "G2"), (1000, 65536, 2, "G2")],
                    placed=[(0, (1,), pod(cpu=0, num=1, milli=700)),
                            (1, (1,), pod(cpu=0, num=1, milli=700))])
    frag = Fragmentation(target, state)(state.cpu_left, state.gpu_left, state.model_id)
    # n0: 1300 idle; the 500 pod fits GPU 0 and CPU, so only GPU 1's 300 is stranded:
    # 0.5*1300 + 0.5*300 = 800. n1: 1000 milli CPU < 2000: all 1300 stranded: 1300.
    assert frag.tolist() == [800.0, 1300.0]


def test_node_resources_fit_refuses_a_node_short_of_cpu_or_memory() -> None:
    state = cluster([(4000, 65536, 8, "G2"), (64000, 65536, 8, "G2"), (64000, 2048, 8, "G2")],
                    rank=[0, 1, 2])
    asks = pod(cpu=8000, mem=4096, num=1, milli=1000)
    assert feasible(state, asks).tolist() == [False, True, False]
    for policy in (BestFit(), GpuPacking(), GpuClustering(), DotProduct(), RandomFit()):
        assert policy.choose(state, asks)[0] == 1
    # Capacity is net of what is placed: 60000 CPU left on n1 after a 4000 pod.
    state.place(1, (), pod(cpu=60000, mem=1))
    assert not feasible(state, asks).any()
    assert BestFit().choose(state, asks) is None


def test_gpu_spec_limits_the_models() -> None:
    state = cluster([(64000, 65536, 2, "T4"), (64000, 65536, 8, "V100M16"),
                     (64000, 65536, 0, "")], rank=[0, 1, 2])
    assert feasible(state, pod(num=1, milli=500, spec="V100M16")).tolist() == [False, True, False]
    assert feasible(state, pod(num=1, milli=500, spec="A10|T4")).tolist() == [True, False, False]
    assert feasible(state, pod(num=1, milli=500)).tolist() == [True, True, False]
    assert feasible(state, pod()).tolist() == [True, True, True]  # no GPU: any node
    # Best fit would prefer the tight T4 node; the spec sends the pod to the V100.
    assert BestFit().choose(state, pod(num=1, milli=500, spec="V100M16")) == (1, (0,))
    fgd = make_policy("fgd", Pods.of([("t", 1000, 1, 1, 500, "V100M16")]))
    fgd.reset(state)
    assert fgd.choose(state, pod(num=1, milli=500, spec="V100M16"))[0] == 1
    assert fgd.choose(state, pod(num=1, milli=500, spec="P100")) is None


def test_multi_gpu_pods_take_whole_free_gpus_on_one_node() -> None:
    # n0: 4 GPUs, GPU 0 holds a 200 share; n1 and n2: 2 free GPUs each (4 free in all).
    state = cluster([(64000, 65536, 4, "G2"), (64000, 65536, 2, "G2"), (64000, 65536, 2, "G2")],
                    placed=[(0, (0,), pod(cpu=0, num=1, milli=200))])
    assert feasible(state, pod(num=3, milli=1000)).tolist() == [True, False, False]
    assert not feasible(state, pod(num=4, milli=1000)).any()  # never split over nodes
    for policy in (BestFit(), GpuPacking(), GpuClustering(), DotProduct(), RandomFit(),
                   make_policy("fgd", Pods.of([("t", 1000, 1, 1, 500)]))):
        policy.reset(state)
        assert policy.choose(state, pod(num=3, milli=1000)) == (0, (1, 2, 3))
        assert policy.choose(state, pod(num=4, milli=1000)) is None


def test_fgd_on_gpu_pods_leaves_the_pods_asking_no_gpu_to_chance() -> None:
    """FGD keeps a pod asking no GPU off the node whose free GPUs need the CPU it would eat;
    under our profile (and in FGD's variant run beside ours) it goes to any node that fits,
    here the lowest rank; pods asking a GPU are decided alike."""
    # n0: 8 free GPUs and 8 cores; n1: its 8 GPUs all held, 8 cores left.
    whole = pod(cpu=0, num=8, milli=1000)
    state = cluster([(8000, 65536, 8, "G2"), (16000, 65536, 8, "G2")], rank=[0, 1],
                    placed=[(1, tuple(range(8)), whole)])
    typical = Pods.of([("t", 4000, 1024, 1, 1000)])  # one GPU and 4 cores
    fgd, only_gpu = make_policy("fgd", typical), make_policy("fgd-gpu-pods", typical)
    for policy in (fgd, only_gpu):
        policy.reset(state)
        assert policy.choose(state, pod(cpu=4000, num=1, milli=1000))[0] == 0
    assert fgd.choose(state, pod(cpu=6000)) == (1, ())
    assert only_gpu.choose(state, pod(cpu=6000)) == (0, ())


def test_ties_go_to_the_lowest_rank() -> None:
    state = cluster([(64000, 65536, 8, "G2")] * 4, rank=[3, 1, 0, 2])
    for policy in (BestFit(), GpuPacking(), GpuClustering(), DotProduct(),
                   make_policy("fgd", Pods.of([("t", 1000, 1, 1, 500)]))):
        policy.reset(state)
        assert policy.choose(state, pod(num=1, milli=500))[0] == 2


def test_packing_clustering_and_dot_product_scores_by_hand() -> None:
    # n0: 8 GPUs, GPU 0 holds a 300 share (700 left); n1: 8 free GPUs; n2: 2 GPUs, one
    # holding a whole-GPU pod.
    state = cluster([(96000, 65536, 8, "G2"), (96000, 65536, 8, "G2"), (96000, 65536, 2, "T4")],
                    placed=[(0, (0,), pod(cpu=0, num=1, milli=300)),
                            (2, (0,), pod(cpu=0, num=1, milli=1000))])
    share = pod(cpu=0, num=1, milli=500)
    # Packing: n0 shares GPU 0: max(100 - (700*100//1000)//10, 50) = 93; n1 all free:
    # max(33 - 8, 8) = 25; n2 must use a free GPU on a used node: max(50 - 1, 33) = 49.
    assert GpuPacking().score(state, share).tolist() == [93, 25, 49]
    assert GpuPacking().choose(state, share) == (0, (0,))
    # Clustering: n0 hosts only sharing pods: 25*(8000-7700)//8000 + 75 = 75; n1 empty:
    # 0 + 25; n2 hosts only a 1-GPU pod: 25*(8000-1000)//8000 + 0 = 21.
    assert GpuClustering().score(state, share).tolist() == [75, 25, 21]
    whole = pod(cpu=0, num=1, milli=1000)
    assert GpuClustering().score(state, whole).tolist() == [0, 25, 21 + 75]
    # Dot product (CPU 0): 100 * (1 - (gpu_left/8000 * 500/8000) / 2), truncated:
    # n0 7700 -> 96.99.. -> 96; n1 8000 -> 96.875 -> 96; n2 1000 -> 99.6.. -> 99.
    assert DotProduct().score(state, share).tolist() == [96, 96, 99]
    # Best fit: 100 * (1 - (0.5 * 96000/128000 + 0.5 * (left - 500)/8000)), truncated.
    assert BestFit().score(state, share).tolist() == [17, 15, 59]


def test_random_fit_is_seeded_and_stays_feasible() -> None:
    nodes = make_nodes((f"n{i}", 64000, 65536, 2, "G2") for i in range(20))
    arrivals = Pods.of([(f"p{i}", 1000, 1024, 1, 300) for i in range(60)])
    first = run(RandomFit(), nodes, arrivals, seed=5)
    again = run(RandomFit(), nodes, arrivals, seed=5)
    assert first.placed.all() and np.array_equal(first.allocated_milli, again.allocated_milli)
    s1, s2 = ClusterState(nodes, 5), ClusterState(nodes, 6)
    picks1 = [RandomFit().choose(s1, pod(num=1, milli=300)) for _ in range(10)]
    picks2 = [RandomFit().choose(s2, pod(num=1, milli=300)) for _ in range(10)]
    assert picks1 != picks2


def test_sampling_reaches_the_factor_and_is_reproducible() -> None:
    pods = Pods.of([("cpu", 1000, 1, 0, 0), ("share", 1000, 1, 1, 250), ("one", 1000, 1, 1, 1000),
                    ("eight", 1000, 1, 8, 1000)])
    capacity = 40 * 1000
    idx = sample_workload(pods, capacity, seed=3)
    total = pods.gpu_request[idx].sum()
    # Draws stop at the first whose per-GPU milli would pass the target (the simulator's
    # tuneUpPods rule): short of it by < 1000, over it by < 8000 (an 8-GPU pod still let in).
    assert 1.3 * capacity - 1000 < total <= 1.3 * capacity + 7000
    assert sorted(idx[:4]) == [0, 1, 2, 3]  # the whole list first, shuffled ...
    assert set(idx[4:]) == {0, 1, 2, 3}  # ... then draws with replacement, CPU pods too
    assert np.array_equal(idx, sample_workload(pods, capacity, seed=3))
    assert not np.array_equal(idx, sample_workload(pods, capacity, seed=4))
    drawn = sample_workload(pods, capacity, seed=3, mode="draw")
    assert 1.3 * capacity - 1000 < pods.gpu_request[drawn].sum() <= 1.3 * capacity + 7000
    # A trace asking more than the target loses random pods until it does not.
    big = Pods.of([(f"p{i}", 1000, 1, 1, 1000) for i in range(100)])
    down = sample_workload(big, 50 * 1000, seed=1)
    assert len(set(down)) == len(down) == 65


def test_the_metric_by_hand() -> None:
    # Capacity 10 GPUs. arrive% 90, 99.6, 100.4, 101, 110 -> rounded 90, 100, 100, 101, 110.
    curve = Curve(np.array([9000, 9960, 10040, 10100, 11000]),
                  np.array([8000, 8500, 8700, 8700, 9000]), np.ones(5, bool), 10_000)
    assert figure_at(curve, 1.0) == 14.0  # 100 - mean(85, 87)
    assert figure_at(curve, 1.1) == 10.0
    # No arrival rounds to 100: those within +-1 (99 and 101 %) are averaged.
    curve = Curve(np.array([9000, 9900, 10100, 11000]), np.array([7000, 8000, 8200, 9000]),
                  np.ones(4, bool), 10_000)
    assert figure_at(curve, 1.0) == 19.0
    # Nothing within +-1 of 105 %: the state after the last arrival at or below it (101 %).
    assert figure_at(curve, 1.05) == 18.0


def test_run_counts_failed_pods_as_arrived_but_not_allocated() -> None:
    nodes = make_nodes([("n0", 8000, 65536, 1, "T4")])
    arrivals = Pods.of([("a", 1000, 1, 1, 600), ("b", 1000, 1, 1, 600), ("c", 1000, 1, 0, 0),
                        ("d", 1000, 1, 1, 400)])
    curve = run(BestFit(), nodes, arrivals)
    assert curve.placed.tolist() == [True, False, True, True]
    assert curve.arrived_milli.tolist() == [600, 1200, 1200, 1600]
    assert curve.allocated_milli.tolist() == [600, 600, 600, 1000]
    assert curve.unallocated_pct[-1] == 0.0


def test_target_workload_keeps_the_popular_kinds_up_to_95_percent() -> None:
    rows = ([("a", 4000, 1, 1, 500)] * 10 + [("b", 8000, 1, 0, 0)] * 6
            + [("c", 4000, 1, 2, 1000)] * 3 + [("d", 1000, 1, 1, 100)])
    target = TargetWorkload.from_pods(Pods.of(rows))
    # 10, 16, 19 of 20 pods: 19 >= 95 % of 20, so d is cut and the rest renormalised.
    assert target.milli.tolist() == [500, 0, 1000]
    assert target.freq.tolist() == pytest.approx([10 / 19, 6 / 19, 3 / 19])


def test_load_trace_and_protocol_on_the_small_generated_trace() -> None:
    nodes, pods = load_trace(TRACE)
    assert len(nodes) == 16 and sorted(set(nodes.models)) == [
        "", "A10", "G2", "P100", "T4", "V100M16", "V100M32"]
    assert len(pods) == 240 and "" in pods.spec and "V100M16|V100M32" in pods.spec
    result = run_protocol(TRACE, ["best-fit", "fgd", "random"], seeds=[0, 1])
    again = run_protocol(TRACE, ["best-fit"], seeds=[1])
    assert result["best-fit"]["per_seed"][1] == again["best-fit"]["per_seed"][1]
    for res in result.values():
        assert set(res["per_seed"]) == {0, 1} and 0 <= res["unallocated_gpu_pct_at_100"] < 100
        assert res["published"] is not None


def test_malformed_trace_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\n")
    (tmp_path / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np0,1000,1024,2,500,\n")
    with pytest.raises(ReplayError, match="whole"):
        load_trace(tmp_path)
    with pytest.raises(ReplayError, match="missing"):
        load_trace(tmp_path / "nowhere")


def test_a_pod_list_without_gpu_spec_lets_every_pod_use_any_model(tmp_path: Path) -> None:
    # FGD's own openb_pod_list_multigpu*.csv have no gpu_spec column; a pod list without
    # num_gpu is still no openb file.
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\n")
    (tmp_path / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,2,1000\n")
    _, pods = load_trace(tmp_path)
    assert list(pods.spec) == [""] and pods.num_gpu.tolist() == [2]
    (tmp_path / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,gpu_milli\np0,1000,1024,1000\n")
    with pytest.raises(ReplayError, match="no column num_gpu"):
        load_trace(tmp_path)


def test_the_cli_reports_each_baseline_against_the_published_figure(capsys, tmp_path) -> None:
    from scripts import replay

    code = replay.main(["--workload", "openb", "--protocol", "fgd", "--trace-dir", str(TRACE),
                        "--orders", "2", "--json", "--plots", str(tmp_path)])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["protocol"] == "fgd" and report["seeds"] == [1, 2]
    assert set(report["policies"]) == {"random", "dot-product", "clustering", "packing",
                                       "best-fit", "fgd", "fgd-gpu-pods", "ours"}
    ours = report["policies"]["ours"]
    assert ours["published"] is None and ours["decisions_per_s"] > 0
    assert 0 <= ours["unallocated_gpu_pct_at_100"] <= 100
    best = report["policies"]["best-fit"]
    assert best["published"] == 7.09 and set(best["per_order"]) == {"1", "2"}
    assert best["unallocated_gpu_pct_at_100"] == pytest.approx(
        sorted(best["per_order"].values())[0] / 2 + sorted(best["per_order"].values())[1] / 2)
    assert len(best["curve"]["arrived_pct"]) == len(best["curve"]["unallocated_pct_median"])
    assert Path(report["plots"][0]).stat().st_size > 0


@pytest.mark.parametrize("argv", [
    ["--protocol", "fgd", "--workload", "generated"],
    ["--protocol", "fgd", "--workload", "openb"],  # no trace
    ["--protocol", "fgd", "--workload", "openb", "--trace-dir", str(TRACE), "--policies",
     "default", "ours"],
])
def test_the_cli_refuses_what_the_protocol_does_not_replay(capsys, argv) -> None:
    from scripts import replay

    with pytest.raises(SystemExit) as exit_info:
        replay.main(argv)
    assert exit_info.value.code == 2 and "--protocol fgd" in capsys.readouterr().err


def test_the_cli_names_a_missing_trace_clearly(capsys, tmp_path) -> None:
    from scripts import replay

    code = replay.main(["--workload", "openb", "--protocol", "fgd", "--trace-dir",
                        str(tmp_path), "--orders", "1"])
    assert code == 2 and "error:" in capsys.readouterr().err
