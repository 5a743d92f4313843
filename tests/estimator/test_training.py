"""Artefact metadata: the three pads and the families seen, from the real rows."""

import numpy as np
import pytest

from estimator.fitting.regressors import DESIGNS
from estimator.fitting.training import fit
from estimator.padding import affine_pad, held_out_predictions
from estimator.reference.tables import load_target

DESIGN = "device-constant"  # no forest: seconds


@pytest.fixture(scope="module")
def frame(data_dir):
    return load_target("train-mem", data_dir)


def test_a_family_absent_from_training_gets_the_leave_one_family_out_pad(frame) -> None:
    from estimator.fitting.evaluation import families, matrix

    _, meta = fit("train-mem", DESIGN, frame, with_stats=False)
    assert meta["seen_families"] == ["densenet", "resnet", "vgg"]
    assert meta["pad_unseen_family_basis"] == "leave one family out"
    usable = frame[~frame["over_capacity"]].reset_index(drop=True)
    design = DESIGNS["train-mem"][DESIGN]
    X, y = matrix(usable, design), usable["y"].to_numpy(float)
    by_model, by_family = (held_out_predictions(design.make, X, y, groups)
                           for groups in (usable["model"].to_numpy(), families(usable)))
    fraction, mib = meta["pad_unseen_family"], meta["pad_unseen_family_mib"]
    assert (fraction, mib) == pytest.approx(affine_pad(y, [by_model, by_family]))
    for predicted in (by_model, by_family):
        assert np.all(predicted * (1 + fraction) + mib >= y - 1e-6)
    # VGG from ResNets and DenseNets: the seen pad alone would leave rows short
    assert np.any(by_family * (1 + meta["pad_seen"]) < y)
    assert meta["pad_unseen_gpu"] >= meta["pad_seen"] and meta["censored_rows"] == 0


def test_one_family_cannot_calibrate_a_family_pad(frame) -> None:
    resnets = frame[frame["model"].str.startswith("resnet")]
    _, meta = fit("train-mem", DESIGN, resnets, with_stats=False)
    assert meta["seen_families"] == ["resnet"]
    assert meta["pad_unseen_family"] == max(meta["pad_seen"], meta["pad_unseen_gpu"])
    assert "not calibrated" in meta["pad_unseen_family_basis"]


def test_fixed_pad_designs_keep_their_pad_everywhere(frame) -> None:
    _, meta = fit("train-mem", "paper-rfr", frame, with_stats=False)
    assert meta["pad_seen"] == meta["pad_unseen_gpu"] == meta["pad_unseen_family"] == 0.0898


def test_an_unseen_family_also_gets_a_pad_beside_its_workspace_range(frame) -> None:
    """Designs anchored on the simulated device memory carry the pad of what the workspace
    range leaves, from the same leave-one-model-out and leave-one-family-out predictions."""
    from estimator.fitting.evaluation import families, matrix
    from estimator.padding import held_out_predictions, workspace_range

    design = DESIGNS["train-mem"][DESIGN]
    assert design.workspace_margin and not DESIGNS["train-mem"]["paper-rfr"].workspace_margin
    _, meta = fit("train-mem", DESIGN, frame, with_stats=False)
    usable = frame[~frame["over_capacity"]].reset_index(drop=True)
    X, y = matrix(usable, design), usable["y"].to_numpy(float)
    workspace = workspace_range(usable["sim_workspace_mb"], usable["sim_workspace_max_mb"])
    want = affine_pad(y, [held_out_predictions(design.make, X, y, groups)
                          for groups in (usable["model"].to_numpy(), families(usable))], workspace)
    assert (meta["pad_unseen_family_workspace"],
            meta["pad_unseen_family_workspace_mib"]) == pytest.approx(want)
    assert meta["pad_unseen_family_workspace"] < meta["pad_unseen_family"]
    _, rfr = fit("train-mem", "paper-rfr", frame, with_stats=False)
    assert "pad_unseen_family_workspace" not in rfr
    resnets = frame[frame["model"].str.startswith("resnet")]
    assert "pad_unseen_family_workspace" not in fit("train-mem", DESIGN, resnets,
                                                    with_stats=False)[1]
