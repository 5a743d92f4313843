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
