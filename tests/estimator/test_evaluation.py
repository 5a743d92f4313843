"""The evaluation protocols on the real data: held-out rows never inform their own pad."""

import pytest

from estimator.data import load_target
from estimator.evaluation import held_out, metrics
from estimator.regressors import DESIGNS


@pytest.fixture(scope="module")
def frame(data_dir):
    return load_target("train-mem", data_dir)


def test_data_flags_the_twenty_interpolated_rows(frame) -> None:
    assert len(frame) == 240
    assert int(frame["over_capacity"].sum()) == 20
    assert set(frame[frame["over_capacity"]]["batch"]) == {64}


def test_lomo_keeps_every_held_out_job_within_its_pad(frame) -> None:
    rows = held_out(DESIGNS["train-mem"]["ours"], frame, "lomo", n_jobs=1)
    assert len(rows) == 240 and rows["model"].nunique() == 12
    m = metrics(rows)
    assert m["under_alloc_pct"] == 0.0
    assert m["oom_detected_pct"] == 100.0
    paper = metrics(held_out(DESIGNS["train-mem"]["paper-rfr"], frame, "lomo", n_jobs=1))
    assert m["avg_err_pct"] < paper["avg_err_pct"] and paper["under_alloc_pct"] > 0


def test_missing_data_dir_is_a_clear_error(tmp_path) -> None:
    from estimator.errors import DataMissing

    with pytest.raises(DataMissing, match="--data"):
        load_target("train-mem", tmp_path)
