"""The replay report as text: one row per policy, each compared with the default."""

from __future__ import annotations

from replay.report import render

FIGURES = {"avg_queue_s": 1.0, "oom_count": 0, "unscheduled": 0, "decisions_per_s": 100.0}


def test_render_compares_each_policy_with_the_default() -> None:
    report = {"workload": "generated", "jobs": 2,
              "cluster": {"nodes": 1, "gpus": 2, "types": ["T4"]},
              "world": "hand-made", "startup_s": 10.0, "alpha": 0.47, "policies": {
                  "default": {"makespan_s": 200.0, "avg_jct_s": 100.0, "p95_jct_s": 150.0,
                              "mem_util": 0.25, **FIGURES},
                  "ours": {"makespan_s": 100.0, "avg_jct_s": 50.0, "p95_jct_s": 80.0,
                           "mem_util": 0.5, **FIGURES}}}
    text = render(report)
    assert text.startswith("workload generated: 2 jobs on 2 GPUs (T4)")
    assert "ours vs default: makespan -50.0 %, avg JCT 2.00x lower, memory utilisation 2.00x" \
        in text
    assert len(text.splitlines()) == 3 + 1 + 2 + 2  # header, table head, rows, comparison
