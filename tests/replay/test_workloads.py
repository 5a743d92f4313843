"""Workloads and cluster specs: the paper trace, generated mixes, shuffled orders."""

from __future__ import annotations

import pytest

from replay import workloads


def test_paper_trace_and_cluster_parse(data_dir) -> None:
    jobs = workloads.paper_workload(data_dir)
    assert len(jobs) == 360 and sum(j.task == "train" for j in jobs) == 48
    assert 1000 < max(j.arrival_s for j in jobs) < 1200
    nodes = workloads.parse_cluster(workloads.PAPER_CLUSTER)
    assert sorted(n.gpu_type for n in nodes) == ["RTX-2070S", "RTX-2070S", "RTX-3070",
                                                 "RTX-3070", "RTX-3090"]
    with pytest.raises(workloads.ReplayError, match="TYPE:NODESxGPUS"):
        workloads.parse_cluster("H100:2")
    mixed = workloads.parse_cluster("T4:2x4,T4:2x1")  # one type twice: numbered on
    assert [(n.name, n.count) for n in mixed] == [("t4-0", 4), ("t4-1", 4), ("t4-2", 1),
                                                  ("t4-3", 1)]


def test_shuffled_order_keeps_the_arrival_times_and_the_jobs() -> None:
    jobs = workloads.generated_workload(50, 10.0, seed=3, train_fraction=0.5)
    shuffled = workloads.shuffle_order(jobs, 1)
    assert [(j.id, j.arrival_s) for j in shuffled] == [(j.id, j.arrival_s) for j in jobs]
    shape = lambda j: (j.model, j.task, j.batch, j.units)  # noqa: E731
    assert sorted(map(shape, shuffled)) == sorted(map(shape, jobs))
    assert list(map(shape, shuffled)) != list(map(shape, jobs))
    assert workloads.shuffle_order(jobs, 1) == shuffled != workloads.shuffle_order(jobs, 2)
