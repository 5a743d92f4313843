"""Observed runs as training rows, and the before/after figure of refitting with them."""

from __future__ import annotations

import json

import pytest

from estimator.fitting.observations import observation_rows, refit_gain
from estimator.reference.tables import load_target


def _observations(data_dir, slowdown: float = 1.5) -> list[dict]:
    """What the monitor would record if this cluster's RTX 3090s ran `slowdown` x slower
    than the reference data says (power-capped cards, say)."""
    rows = load_target("train-time", data_dir)
    rows = rows[(rows["gpu"] == "RTX-3090") & ~rows["over_capacity"]]
    return [{"uid": f"u{i}", "model": r.model, "task": "train", "batch": str(r.batch),
             "units": "3", "gpu_type": "RTX-3090", "seconds": str(r.y * slowdown * 3),
             "oom": "0", "outcome": "succeeded"} for i, r in enumerate(rows.itertuples())]


def test_only_successful_known_runs_become_rows_in_the_targets_unit(data_dir) -> None:
    good = {"model": "resnet50", "task": "train", "batch": "32", "units": "4",
            "gpu_type": "A100-80GB", "seconds": "400", "outcome": "succeeded"}
    bad = [{**good, "outcome": "oom"}, {**good, "model": "nope"}, {**good, "gpu_type": "TPU"},
           {**good, "units": "0"}, {**good, "seconds": "x"}, {**good, "task": "inference"},
           {k: v for k, v in good.items() if k != "batch"}]
    rows = observation_rows([good, *bad], "train-time")
    assert rows.to_dict("records") == [{"model": "resnet50", "batch": 32, "gpu": "A100-80GB",
                                        "y": 100.0, "source": "observed"}]
    infer = observation_rows([{**good, "task": "inference", "units": "1000"}], "infer-time")
    assert infer["y"].tolist() == [400.0]  # ms per request
    with pytest.raises(ValueError, match="time targets"):
        observation_rows([good], "train-mem")


def test_refitting_with_observations_lowers_the_error_on_them(data_dir) -> None:
    extra = observation_rows(_observations(data_dir), "train-time")
    frame = load_target("train-time", data_dir, extra=extra)
    gain = refit_gain("train-time", "ours", frame)
    assert gain["observations"] == len(extra) >= 20
    assert gain["before_mape_pct"] > 25  # the reference data is 1.5x off on this cluster
    assert gain["after_mape_pct"] < gain["before_mape_pct"] / 2


def test_train_cli_reads_observations_from_redis(data_dir, store, redis_url, tmp_path, capsys) -> None:
    from scripts import train

    for observation in _observations(data_dir):
        store.record_observation(observation)
    code = train.main(["--with-observations", "--redis", redis_url, "--data", str(data_dir),
                       "--design", "ours", "--out", str(tmp_path), "--no-stats", "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    gain = summary["train-time.ours.observations"]
    assert gain["after_mape_pct"] < gain["before_mape_pct"]
    assert (tmp_path / "train-time.ours.joblib").is_file()
    assert "infer-time.ours.observations" not in summary or summary["infer-time.ours.observations"]


def _ooms(data_dir, factor: float = 1.3) -> list[dict]:
    """Runs killed for memory on a cluster whose RTX 3090s need `factor` x what the
    reference data measured (their reservations were the measured peak, so too small)."""
    rows = load_target("train-mem", data_dir)
    rows = rows[(rows["gpu"] == "RTX-3090") & rows["model"].isin(["vgg16", "vgg19", "resnet50"])]
    return [{"uid": f"k{i}", "model": r.model, "task": "train", "batch": str(r.batch),
             "units": "1", "gpu_type": "RTX-3090", "seconds": "30", "oom": "1",
             "outcome": "oom", "reserved_mib": str(r.y * factor)}
            for i, r in enumerate(rows.itertuples())]


def test_runs_killed_for_memory_become_censored_rows() -> None:
    from estimator.fitting.observations import censored_rows

    killed = {"model": "vgg16", "task": "train", "batch": "32", "gpu_type": "RTX-3090",
              "reserved_mib": "9000", "oom": "1", "outcome": "oom"}
    bad = [{**killed, "oom": "0", "outcome": "succeeded"}, {**killed, "model": "nope"},
           {**killed, "gpu_type": "TPU"}, {**killed, "reserved_mib": "-1"},
           {**killed, "reserved_mib": "99999999"}, {**killed, "task": "inference"},
           {k: v for k, v in killed.items() if k != "reserved_mib"}]
    rows = censored_rows([killed, {**killed, "oom": "0"}, *bad], "train-mem")
    assert rows.to_dict("records") == [
        {"model": "vgg16", "batch": 32, "gpu": "RTX-3090", "y": 9000.0, "source": "oom",
         "censored": True}] * 2  # outcome "oom" alone says so too
    with pytest.raises(ValueError, match="memory"):
        censored_rows([killed], "train-time")


def test_refitting_with_killed_runs_stops_under_reserving_them(data_dir) -> None:
    from estimator.fitting.observations import censored_gain, censored_rows

    extra = censored_rows(_ooms(data_dir), "train-mem")
    frame = load_target("train-mem", data_dir, extra=extra)
    gain = censored_gain("train-mem", "device-constant", frame)
    assert gain["killed_runs"] == len(extra) == 12
    assert gain["still_killed_before_pct"] > 50  # the reference pad cannot know this cluster
    assert gain["still_killed_after_pct"] < gain["still_killed_before_pct"] / 2


def test_train_cli_fits_memory_on_killed_runs(data_dir, store, redis_url, tmp_path,
                                              capsys) -> None:
    from scripts import train

    for observation in _ooms(data_dir):
        store.record_observation(observation)
    code = train.main(["--with-observations", "--redis", redis_url, "--data", str(data_dir),
                       "--target", "train-mem", "--design", "device-constant",
                       "--out", str(tmp_path), "--no-stats", "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["train-mem.device-constant"]["censored_rows"] == 12
    assert summary["train-mem.device-constant.observations"]["killed_runs"] == 12
    meta = json.loads((tmp_path / "train-mem.device-constant.json").read_text())
    assert meta["censored_rows"] == 12 and meta["sources"]["oom"] == 12
