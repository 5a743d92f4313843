"""estimator/fitting/own_fits.py: a card profiled on another stack gets a memory fit of its
own, and the reference cards' predictions do not move (the H200's rows, real data)."""

from pathlib import Path

import pandas as pd
import pytest

from estimator.fitting.evaluation import held_out
from estimator.fitting.own_fits import MIN_MODELS, own_fit_gpus, split
from estimator.fitting.regressors import DESIGNS
from estimator.fitting.training import fit
from estimator.reference.tables import load_target

H200_ROWS = Path(__file__).resolve().parents[2] / "profiles" / "measured" / "H200.csv"


@pytest.fixture(scope="module")
def frame(data_dir):
    return load_target("train-mem", data_dir, measurements=H200_ROWS)


def test_only_a_profiled_card_the_reference_rows_do_not_cover_is_fitted_alone(frame) -> None:
    assert own_fit_gpus(frame) == ["H200"]
    # Profiled rows of a reference card stay in the shared fit.
    k80 = frame[frame["gpu"] == "H200"].assign(gpu="K80")
    assert own_fit_gpus(pd.concat([frame[frame["gpu"] != "H200"], k80])) == []
    # Too few models to calibrate a pad of its own: shared too.
    few = frame[frame["model"].isin(sorted(set(frame["model"]))[:MIN_MODELS - 1])]
    assert "H200" in set(few["gpu"]) and own_fit_gpus(few) == []


def test_the_reference_cards_are_judged_as_if_the_card_were_not_there(frame) -> None:
    """Held out (random folds: the cheapest of the protocols that split) as `schedtune
    train` fits: the reference rows' predictions and pads equal those without the H200's
    rows (not split, the folds and the fits differ: the test fails)."""
    design = DESIGNS["train-mem"]["ours"]
    shared, cards = split(frame)

    def reference(rows: pd.DataFrame) -> pd.DataFrame:
        kept = rows[rows["gpu"] != "H200"].sort_values(["model", "batch", "gpu"])
        return kept[["predicted", "padded"]].reset_index(drop=True)

    alone = held_out(design, shared, "random")
    assert reference(held_out(design, frame, "random", own_fits=True)).equals(reference(alone))
    assert list(cards) == ["H200"]


def test_a_card_fitted_alone_has_its_own_pads_and_no_other_gpu_to_hold_out(frame) -> None:
    _, cards = split(frame)
    _, meta = fit("train-mem", "device-constant", cards["H200"], with_stats=False)
    assert meta["seen_gpus"] == ["H200"] and meta["pad_unseen_gpu"] == meta["pad_seen"]


def test_a_family_held_out_of_a_card_fitted_alone_is_padded_at_least_as_the_shared_fit_pads_one(
        frame) -> None:
    """The H200's ResNets held out of its own fit: its 13 other families' pad left ResNet-18
    at batches 16 and 32 short (1,531 and 2,171 MiB padded against 1,557 and 2,259 held);
    floored at the shared fit's unseen-family pad (itself without the ResNets), as the
    service pads, every row is covered."""
    from estimator.fitting.evaluation import _run_fold, families

    design = DESIGNS["train-mem"]["ours"]
    shared, cards = split(frame)
    h200 = cards["H200"][~cards["H200"]["over_capacity"]].reset_index(drop=True)
    resnets = families(h200) == "resnet"
    fit_idx, test_idx = (h200.index[~resnets].to_numpy(), h200.index[resnets].to_numpy())
    actual = h200.loc[test_idx, "y"].to_numpy()
    *_, alone = _run_fold(design, h200, "lofo", fit_idx, test_idx)
    *_, floored = _run_fold(design, h200, "lofo", fit_idx, test_idx, shared_rows=shared)
    assert (alone < actual).sum() == 2
    assert (floored >= actual).all() and (floored >= alone).all()
