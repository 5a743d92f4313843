"""`schedtune features`: a bad --out, an unusable cache or nothing to refresh is refused,
and a refused upsert leaves the cache as it was (no stray temporary file)."""

from __future__ import annotations

import pytest

from estimator import feature_table
from estimator.errors import EstimatorError
from scripts import features


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        features.main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_out_naming_a_file_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "taken").write_text("")
    assert "is not a directory" in _usage_error(["resnet18", "--out", str(tmp_path / "taken")],
                                                capsys)


def test_device_only_with_nothing_cached_says_so(tmp_path, capsys) -> None:
    err = _usage_error(["resnet18", "--device-only", "--out", str(tmp_path)], capsys)
    assert "nothing to refresh" in err and "schedtune features resnet18" in err


@pytest.mark.parametrize("cached", [
    "model,task,batch,sim_peak_mb,extra\nresnet18,train,8,1.0,2\n",
    "garbage\n\x01\x02,,,\nmore,garbage,here\n",
])
def test_an_unusable_cache_is_refused_and_left_alone(tmp_path, cached) -> None:
    path = tmp_path / feature_table.SIM_FILE
    path.write_text(cached)
    with pytest.raises(EstimatorError, match="move the file away"):
        feature_table.upsert(path, ["model", "task", "batch"],
                             [{"model": "resnet18", "task": "train", "batch": 16,
                               "sim_peak_mb": 2.0}])
    assert path.read_text() == cached
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim_peaks.csv", "sim_peaks.lock"]


def test_a_write_that_fails_removes_its_temporary_file(tmp_path, monkeypatch) -> None:
    def full_disk(*_):
        raise OSError("No space left on device")

    monkeypatch.setattr(feature_table.os, "replace", full_disk)
    with pytest.raises(OSError):
        feature_table.upsert(tmp_path / feature_table.MODELS_FILE, ["model"], [{"model": "m"}])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.lock"]
