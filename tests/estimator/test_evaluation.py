"""The evaluation protocols on the real data: held-out rows never inform their own pad."""

import pytest

from estimator.fitting.evaluation import held_out, metrics
from estimator.fitting.regressors import DESIGNS
from estimator.padding import padded_unseen_family, workspace_range
from estimator.reference.tables import load_target


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


def test_lofo_holds_out_whole_families_never_a_sibling_in_fitting(frame) -> None:
    from estimator.fitting.evaluation import _outer_splits, families

    family = families(frame)
    assert set(family) == {"resnet", "densenet", "vgg"}
    held = []
    for fit_idx, test_idx in _outer_splits(frame, "lofo"):
        (out,) = set(family[test_idx])
        assert out not in set(family[fit_idx])
        held.extend(test_idx)
    assert sorted(held) == list(range(len(frame)))


def test_per_family_report_splits_the_same_held_out_rows(frame) -> None:
    from estimator.fitting.evaluation import evaluate_by_family

    designs = {"ours": DESIGNS["train-mem"]["ours"]}
    report = evaluate_by_family(designs, frame, "lofo", n_jobs=1)["ours"]
    assert set(report) == {"all", "resnet", "densenet", "vgg"}
    assert sum(m["rows"] for f, m in report.items() if f != "all") == report["all"]["rows"]
    assert report["all"]["max_err_pct"] == max(m["max_err_pct"] for m in report.values())


def test_lofo_gives_a_held_out_family_the_pad_the_service_would(frame) -> None:
    """A held-out family is padded as the artefact fitted on the other families pads an
    unseen family (its pad, or the workspace margin and its pad): what a user's new kind
    of model gets."""
    from estimator.fitting.evaluation import _outer_splits, families
    from estimator.fitting.training import fit

    design = "device-constant"
    rows = held_out(DESIGNS["train-mem"][design], frame, "lofo", n_jobs=1)
    family = families(frame)
    for fit_idx, test_idx in _outer_splits(frame, "lofo"):
        (out,) = set(family[test_idx])
        _, meta = fit("train-mem", design, frame.iloc[fit_idx], with_stats=False)
        assert out not in meta["seen_families"]
        held = rows[rows["family"] == out]
        assert held["pad"].unique().tolist() == [pytest.approx(meta["pad_seen"])]
        assert meta["pad_unseen_family_mib"] > 0 or meta["pad_unseen_family_workspace_mib"] > 0
        test = frame.iloc[test_idx]
        assert held["padded"].to_numpy() == pytest.approx(padded_unseen_family(
            held["predicted"].to_numpy(), workspace_range(test["sim_workspace_mb"],
                                                          test["sim_workspace_max_mb"]),
            meta["pad_seen"], meta))


def test_each_simulated_part_removes_residual_for_every_family(frame) -> None:
    from estimator.fitting.evaluation import ANCHORS, residual_parts

    parts = residual_parts(frame)
    assert set(parts) == {"resnet", "densenet", "vgg", "all"}
    first, last = ANCHORS[0][0], ANCHORS[-1][0]
    for family in ("resnet", "densenet", "vgg", "all"):
        left = parts[family]["mean_abs_left_mib"]
        assert left[last] < 0.5 * left[first], family  # allocator + workspace: most of it
    # VGG's overhead was mostly the allocator's: twice the ResNets' before, its residual
    # falls by more than half with the segments alone.
    vgg = parts["vgg"]["mean_abs_left_mib"]
    assert vgg[first] > 2 * parts["resnet"]["mean_abs_left_mib"][first]
    assert vgg["sim_reserved_mb"] < 0.5 * vgg["sim_allocated_mb"]
    assert parts["vgg"]["mean_abs_left_pct"][last] < 8.0
    assert set(parts["all"]["gpu_constant_mib"]) == set(frame["gpu"])


def test_scoring_one_gpu_scores_exactly_its_rows_of_the_same_folds(data_dir) -> None:
    """`--gpu H200`: the H200 rows of the measured ground truth, predicted and padded as
    the whole evaluation predicts them (three GPU types keep it quick)."""
    from estimator.reference.tables import MEASURED_DIR

    full = load_target("train-mem", data_dir, measurements=MEASURED_DIR / "H200.csv")
    frame = full[full["gpu"].isin(["K80", "V100-16GB", "H200"])].reset_index(drop=True)
    design = DESIGNS["train-mem"]["ours"]
    every = held_out(design, frame, "logo", n_jobs=1)
    scored = held_out(design, frame, "logo", n_jobs=1, gpu="H200")
    key = ["model", "batch"]
    want = every[every["gpu"] == "H200"].sort_values(key).reset_index(drop=True)
    got = scored.sort_values(key).reset_index(drop=True)
    assert len(got) == 108 and set(got["gpu"]) == {"H200"}
    assert got[key + ["y", "predicted", "padded"]].equals(want[key + ["y", "predicted", "padded"]])
    with pytest.raises(ValueError, match="no rows on GPU 'A100'"):
        held_out(design, frame, "logo", n_jobs=1, gpu="A100")


def test_reference_rows_alone_without_measurements(data_dir) -> None:
    from estimator.reference.tables import MEASURED_DIR

    assert len(load_target("train-mem", data_dir, measurements=None)) == 240
    assert len(load_target("train-mem", data_dir, measurements=MEASURED_DIR / "H200.csv")) \
        == 240 + 108
