"""`schedtune train`: bad arguments and data are refused before anything is written."""

from __future__ import annotations

import pytest

from estimator.reference.tables import PAPER_DIR
from scripts import train


def test_an_unknown_design_is_refused_with_the_known_ones(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        train.main(["--design", "foo", "--out", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unknown designs ['foo']; known:" in err and "ours" in err


def test_out_naming_a_file_is_refused(tmp_path, capsys) -> None:
    (tmp_path / "taken").write_text("")
    with pytest.raises(SystemExit) as exited:
        train.main(["--out", str(tmp_path / "taken")])
    assert exited.value.code == 2
    assert "is not a directory" in capsys.readouterr().err


def test_a_broken_data_file_is_one_line_and_writes_nothing(tmp_path, capsys) -> None:
    (tmp_path / PAPER_DIR).mkdir()
    (tmp_path / PAPER_DIR / "model_stats.csv").write_text("model,batchsize\n")
    assert train.main(["--target", "train-mem", "--data", str(tmp_path), "--out",
                       str(tmp_path / "out")]) == 1
    assert "model_stats.csv lacks the columns" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_card_profiled_on_another_stack_is_written_alone_and_dropped_without_its_rows(
        tmp_path, data_dir) -> None:
    """With the H200's profiled rows, the memory target gets the shared artefact and the
    H200's own (`estimator.fitting.own_fits`); trained again without them, the H200's
    goes, and the shared one is the same as with them."""
    from pathlib import Path

    h200 = Path(__file__).resolve().parents[2] / "profiles" / "measured" / "H200.csv"
    common = ["--target", "train-mem", "--design", "device-constant", "--no-stats",
              "--data", str(data_dir), "--out", str(tmp_path)]
    assert train.main([*common, "--measurements", str(h200)]) == 0
    names = sorted(p.name for p in tmp_path.glob("*.npz"))
    assert names == ["train-mem.device-constant.H200.npz", "train-mem.device-constant.npz"]
    shared = (tmp_path / "train-mem.device-constant.npz").read_bytes()
    assert train.main([*common, "--measurements", "none"]) == 0
    assert sorted(p.name for p in tmp_path.glob("*")) == [
        "train-mem.device-constant.joblib", "train-mem.device-constant.json",
        "train-mem.device-constant.npz"]
    assert (tmp_path / "train-mem.device-constant.npz").read_bytes() == shared
