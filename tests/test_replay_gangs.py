"""The gang replay: its CLI report, and the behaviours its table rests on (whole gangs hold
nothing, worker-by-worker placement deadlocks, heterogeneity is what ours gains)."""

from __future__ import annotations

import json

import pytest

from extender.settings import Settings
from replay.gang_report import GANG_FIGURES
from replay.gang_workload import GangJob, GangWorld, gang_workload
from replay.gangs import GANG_POLICIES, GangSimulator, make_gang_policy, run_gang_policy
from replay.scenario import Scenario
from replay.workloads import parse_cluster
from scripts import replay as cli


@pytest.fixture(scope="module")
def world():
    return Scenario(world="predicted", data_dir=None).build_world({"T4", "A10", "L4",
                                                                  "A100-80GB"})


def _gang(i: int, size: int, gpus: int, model: str = "resnet50", epochs: int = 5,
          at: float = 0.0) -> GangJob:
    return GangJob(i, at, model, "train", 32 * gpus, epochs, gpus=gpus, size=size)


def test_cli_reports_each_policy_medians(capsys):
    assert cli.main(["--workload", "gangs", "--jobs", "30", "--orders", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["policies"]) == set(GANG_POLICIES)
    assert any("blind" in name for name in report["policies"])
    for figures in report["policies"].values():
        assert set(GANG_FIGURES) <= set(figures)
        assert figures["makespan_s"] > 0 and figures["avg_jct_s"] > 0
    assert report["orders"] == 2 and len(report["per_order"]) == 2
    assert report["gangs"] > 0 and report["network_gbps"] > 0
    ours = report["policies"]["ours"]
    assert ours["deadlocks"] == 0 and ours["partial_gang_gpu_s"] == 0
    assert set(report["ours_vs_gang_blind_pct"]) >= {"makespan_s", "avg_jct_s"}


def test_cli_text_table(capsys):
    assert cli.main(["--workload", "gangs", "--jobs", "20"]) == 0
    out = capsys.readouterr().out
    assert "partial GPU-s" in out and "one-at-a-time" in out and "gang-blind" in out


def test_workload_is_seeded_and_fits_the_cluster():
    nodes = parse_cluster("T4:6x8,A10:4x4,L4:4x8,A100-80GB:2x8")
    jobs = gang_workload(200, 2.0, 3, 0.3, nodes)
    assert jobs == gang_workload(200, 2.0, 3, 0.3, nodes)
    gangs = [j for j in jobs if j.size > 1]
    assert gangs and all(2 <= j.size <= 16 and j.gpus in (1, 2, 4, 8) for j in gangs)
    assert all(j.size * j.gpus <= 32 for j in gangs)
    assert len({j.id for j in jobs}) == len(jobs)


def test_one_at_a_time_deadlocks_where_ours_waits_whole(world):
    """Two gangs of 2 workers x 2 GPUs submitted together on 2 nodes of 2 GPUs: each fits
    alone, not both. Worker by worker, each takes a node and waits for the other."""
    nodes = parse_cluster("A10:2x2")
    jobs = [_gang(0, 2, 2), _gang(1, 2, 2)]
    blind = run_gang_policy("one-at-a-time", world, nodes, jobs, Settings())
    assert blind["deadlocks"] >= 1
    assert blind["partial_gang_gpu_s"] >= 600 * 2  # a node held through the rendezvous timeout
    assert blind["unscheduled"] == 0 and blind["failed"] == 0  # broken, then both ran
    ours = run_gang_policy("ours", world, nodes, jobs, Settings())
    assert ours["deadlocks"] == 0 and ours["partial_gang_gpu_s"] == 0
    assert ours["unscheduled"] == 0
    assert ours["makespan_s"] < blind["makespan_s"]


def test_ours_picks_the_fast_type_where_blind_packs_the_big_slow_node(world):
    """A gang of 4 one-GPU workers on an 8-GPU T4 node and a 4-GPU A10 node: blind packs it
    onto the roomiest (T4), ours onto the A10s, which finish it sooner."""
    nodes = parse_cluster("T4:1x8,A10:1x4")
    jobs = [_gang(0, 4, 1, epochs=10)]
    where = {}
    for name in ("ours", "gang-blind"):
        truth = GangWorld(world)
        sim = GangSimulator(world, nodes, make_gang_policy(name, nodes, Settings(), truth),
                            truth)
        (outcome,) = sim.run(jobs)
        where[name] = (sim.by_name[outcome.node].gpu_type, outcome.ended_s)
    assert where["ours"][0] == "A10" and where["gang-blind"][0] == "T4"
    assert where["ours"][1] < where["gang-blind"][1]


def test_a_gang_runs_at_its_slowest_member_plus_its_all_reduce(world):
    """Across two nodes the gang pays the ring all-reduce; on one node it does not."""
    one = run_gang_policy("ours", world, parse_cluster("A10:1x4"), [_gang(0, 4, 1)], Settings())
    two = run_gang_policy("ours", world, parse_cluster("A10:2x2"), [_gang(0, 4, 1)], Settings())
    slow = run_gang_policy("ours", world, parse_cluster("A10:2x2"), [_gang(0, 4, 1)],
                           Settings(), network_gbps=1.0)
    assert one["makespan_s"] < two["makespan_s"] < slow["makespan_s"]
