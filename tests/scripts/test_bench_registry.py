"""`python -m scripts.bench_registry` runs end to end on a real Redis and prints its figures."""

from __future__ import annotations

from scripts import bench_registry


def test_the_registry_benchmark_prints_every_figure(capsys) -> None:
    assert bench_registry.main(["--models", "10"]) == 0
    printed = dict(line.split(": ") for line in capsys.readouterr().out.splitlines())
    assert set(printed) == {"first_load_of_10_ms", "reload_after_one_changed_ms",
                            "reload_after_one_unusable_added_ms", "filter_p50_builtin_ms",
                            "filter_p50_registered_ms", "filter_p50_stale_entry_ms"}
    assert all(float(value) > 0 for value in printed.values())
