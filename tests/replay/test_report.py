"""The replay report as text: what was assumed, one row per policy, each compared with the
default; many orders as distributions and wins."""

from __future__ import annotations

from replay.report import as_text, render, render_summary

FIGURES = {"avg_queue_s": 1.0, "oom_count": 0, "unscheduled": 0, "decisions_per_s": 100.0,
           "retries": 0, "failed": 0, "placed_on_arrival": 1.0}
HEADER = {"workload": "generated", "jobs": 2,
          "cluster": {"nodes": 1, "gpus": 2, "types": ["T4"], "collocation_limits": {"T4": 4}},
          "world": "hand-made", "startup_s": 10.0, "interference": "uniform: 1/(1 + 0.47 (k-1))",
          "perturbation": None, "assumptions": ["start-up shares the GPU"],
          "oracles": ["oracle"]}


def test_render_states_the_assumptions_and_compares_each_policy_with_the_default() -> None:
    report = {**HEADER, "policies": {
        "default": {"makespan_s": 200.0, "avg_jct_s": 100.0, "p95_jct_s": 150.0,
                    "mem_util": 0.25, **FIGURES},
        "ours": {"makespan_s": 100.0, "avg_jct_s": 50.0, "p95_jct_s": 80.0, "mem_util": 0.5,
                 **FIGURES, "oom_count": 1, "oom_reserves": [
                     {"job_type": "vgg16|train|8|T4", "attempt": 0, "reserved_mib": 4000.0,
                      "floor_after_mib": 5024.0, "true_mib": 4500.0}]},
        "oracle": {"makespan_s": 90.0, "avg_jct_s": 45.0, "p95_jct_s": 80.0, "mem_util": 0.5,
                   **FIGURES, "oracle": True}}}
    text = render(report)
    lines = text.splitlines()
    assert lines[0] == "workload generated: 2 jobs on 2 GPUs (T4); pods per GPU at most: T4 4"
    assert "collocation law: uniform: 1/(1 + 0.47 (k-1))" in lines
    assert "oracles (read the world's truth): oracle" in lines
    assert any(line.strip().startswith("oracle*") for line in lines)
    assert "ours vs default: makespan -50.0 %, avg JCT -50.0 %, memory utilisation 2.00x" \
        in text
    assert "mem util: GPU memory reserved" in " ".join(lines)  # the columns explained
    assert "  ours: vgg16|train|8|T4 attempt 0: 4000.0 -> 5024.0 MiB (4500.0)" in lines
    many = dict(report["policies"]["ours"], oom_reserves=report["policies"]["ours"]
                ["oom_reserves"] * 8)
    lines = render({**report, "policies": {**report["policies"], "ours": many}}).splitlines()
    assert lines.count("  ours: vgg16|train|8|T4 attempt 0: 4000.0 -> 5024.0 MiB (4500.0)") == 5
    assert "  ours: 3 more (--json lists every one)" in lines


def test_the_summary_shows_distributions_and_wins() -> None:
    figure = {"median": 100.0, "p10": 90.0, "p90": 120.0, "worst": 130.0}
    report = {**HEADER, "orders": 16, "reference": "ours",
              "summary": {"ours": {k: figure for k in ("makespan_s", "avg_jct_s", "p95_jct_s",
                                                       "mem_util", "oom_count")}},
              "versus": {"default": {"makespan_s": {"wins": 15, "losses": 1, "ties": 0,
                                                    "median_gap_pct": -20.0,
                                                    "medians_gap_pct": -18.2,
                                                    "medians_gap_90pct": [-25.0, -9.5],
                                                    "worst_gap_pct": 3.5,
                                                    "behind_5pct": 0}}}}
    text = as_text(report)
    assert text == render_summary(report) and "orders: 16" in text
    assert "100 [90, 120] 130" in text
    assert ("ours vs default: wins-losses makespan 15-1 (median -20.0 %, medians -18.2 % "
            "[-25.0, -9.5], worst +3.5 %, > 5 % behind in 0)") in text
