"""A broken reference CSV is an `EstimatorError` naming the file and the problem."""

from __future__ import annotations

import pytest

from estimator.reference.tables import PAPER_DIR, _read_raw
from estimator.errors import EstimatorError

HEAD = ("model,batchsize,activations,parameters,input,peak mem usage,Pipelines/CUDA cores,"
        "Memory bandwidth (GB/s),Memory clock speed (MHz),Tensor cores,SM count\n")
ROW = "resnet18,{batch},227.25,44.59,4.59,{peak},2496,240.6,5012,0,13\n"


@pytest.mark.parametrize("content, words", [
    (b"", "is empty"),
    (HEAD.encode(), "no rows"),
    (HEAD.replace(",peak mem usage", "").encode() + b"resnet18,8,1,1,1,2496,1,1,0,13\n",
     "lacks the columns ['peak mem usage']"),
    ((HEAD + ROW.format(batch=8, peak="abc")).encode(), "'peak mem usage' must be a positive"),
    ((HEAD + ROW.format(batch=8, peak="")).encode(), "got an empty cell"),
    ((HEAD + ROW.format(batch=8, peak=-824)).encode(), "'peak mem usage' must be a positive"),
    ((HEAD + ROW.format(batch=-8, peak=824)).encode(), "'batchsize' must be an integer"),
    ((HEAD + ROW.format(batch="x", peak=824)).encode(), "'batchsize' must be an integer"),
    ((HEAD + ROW.format(batch=8, peak=824).replace("resnet18", "r\xe9snet")).encode("latin-1"),
     "not UTF-8"),
])
def test_a_broken_model_stats_file_is_refused_with_its_name(tmp_path, content, words) -> None:
    (tmp_path / PAPER_DIR).mkdir()
    (tmp_path / PAPER_DIR / "model_stats.csv").write_bytes(content)
    with pytest.raises(EstimatorError, match="model_stats.csv") as caught:
        _read_raw("train-mem", tmp_path)
    assert words in str(caught.value)


def test_a_good_row_still_reads(tmp_path) -> None:
    (tmp_path / PAPER_DIR).mkdir()
    (tmp_path / PAPER_DIR / "model_stats.csv").write_text(HEAD + ROW.format(batch=8, peak=824))
    row = _read_raw("train-mem", tmp_path).iloc[0]
    assert (row["batch"], row["y"], row["data_params_mb"]) == (8, 824.0, 44.59)


MEASURED_HEAD = "model,task,batch,gpu,peak_mib,seconds\n"


@pytest.mark.parametrize("rows, words", [
    ("resnet18,train,8,H200,abc,1.0\n", "'peak_mib' must be a positive"),
    ("resnet18,train,0,H200,900,1.0\n", "'batch' must be an integer"),
    ("resnet18,train,8,B300,900,1.0\n", "GPU types the catalogue does not know: ['B300']"),
    ("resnet18,train,8,H200,900,1.0\nresnet18,inference,8,H200,900,-1\n",
     "data row 2: 'seconds' must be a positive"),  # any task's row, numbered as in the file
    ("resnet18,fly,8,H200,900,1.0\n", "unknown tasks ['fly']"),
])
def test_a_broken_measurements_file_is_refused_with_its_name(tmp_path, rows, words) -> None:
    from estimator.reference.tables import read_measurements

    path = tmp_path / "measured.csv"
    path.write_text(MEASURED_HEAD + rows)
    with pytest.raises(EstimatorError, match="measured.csv") as caught:
        read_measurements("train-mem", path)
    assert words in str(caught.value)


def test_measured_rows_read_per_target_in_its_unit(tmp_path) -> None:
    from estimator.reference.tables import read_measurements, measurements_option

    path = tmp_path / "measured.csv"
    path.write_text(MEASURED_HEAD + "resnet18,inference,8,H200,900,0.000818014\n")
    assert read_measurements("infer-time", path)["y"].tolist() == [pytest.approx(0.818014)]
    assert read_measurements("infer-mem", path)["y"].tolist() == [900.0]
    assert read_measurements("train-mem", tmp_path / "absent.csv").empty
    assert measurements_option("none") is None and measurements_option("a.csv").name == "a.csv"
