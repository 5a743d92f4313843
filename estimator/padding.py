"""The OOM pad: padded = prediction x (1 + E), with E from held-out error only.

E is the largest relative under-prediction, (actual - predicted) / predicted,
seen on rows the regressor was not fitted on (`held_out_pad`, leave one group
out inside the training rows). Only under-prediction matters for OOM, so
over-predictions do not widen the pad. In-sample error never gives a safe E.

Three pads per memory artefact, each from its own held-out scheme (training.fit):

* ``pad_seen``: leave one model out (a job of a known family on a known GPU type);
* ``pad_unseen_gpu``: the larger of that and leave one GPU type out;
* ``pad_unseen_family`` (a fraction) and ``pad_unseen_family_mib``: an affine pad,
  predicted x (1 + E) + M, from leave one model out and leave one architecture family
  out together: the held-out family plays a model unlike any in the data. With families
  as the exchangeable groups this is split-conformal calibration at the strictest level
  the groups allow (every held-out row covered: with k families, a new family's error
  exceeds the largest group's with probability at most 1/(k+1)). Of the (E, M) that
  cover every row, `affine_pad` takes the one of least mean over-allocation: what the
  simulation leaves is mostly MiB (the CUDA context and allocator segments vary by a few
  hundred MiB whatever the job's size), so a pure fraction large enough for a small job
  over-reserves a large one.
* ``pad_unseen_family_workspace`` and ``pad_unseen_family_workspace_mib``: the same
  calibration of what is left once the job's `workspace_range` is added. A model of an
  unseen family is padded to the largest of its GPU type's plain pad, the affine pad and
  the workspace range plus its own affine pad (`padded_unseen_family`): which cuDNN
  algorithm a card picks is not knowable offline, and a family whose convolutions allow
  large workspaces (VGG's wide 224x224 layers) can take the largest one simulated on
  some cards while the families left to calibrate on never do.

A GPU type absent from training gets the workspace pair too (`padded_unseen_gpu`): the
same card-specific cuDNN choice, measured on an H200 (VGG-16 at batch 64 took 12,199 MiB,
VGG-19 10,875) where the plain unseen-GPU pad left it 2 % short.

`estimator.predict` picks among them for one job (`estimator.fitting.evaluation` scores the
same rule).

Censored rows (a job killed for memory: its true peak was above the MiB it held)
enter as lower bounds: `fit_censored` raises their targets to what the fit predicts
when that is higher (at least the bound x `CENSOR_MARGIN`) and refits, and a pad must
lift their held-out prediction above bound x `CENSOR_MARGIN`.

numpy only (no scikit-learn): the service may import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: Floor on E so that a lucky fit never yields a zero pad.
MIN_PAD = 0.02
#: A censored row's true value is taken as at least its bound times this.
CENSOR_MARGIN = 1.05
#: Refits of `fit_censored` (the imputed targets settle within two or three).
CENSOR_ROUNDS = 3
#: Golden-section steps of `affine_pad` (the search interval shrinks 0.618x per step).
GOLDEN_STEPS = 80


def pad_fraction(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Smallest E with predicted * (1 + E) >= actual on every row (at least `MIN_PAD`)."""
    actual, predicted = np.asarray(actual, float), np.asarray(predicted, float)
    if actual.size == 0:
        return MIN_PAD
    if np.any(predicted <= 0):
        raise ValueError("predictions must be positive to derive a relative pad")
    return max(MIN_PAD, float(np.max((actual - predicted) / predicted)))


def padded(predicted_mib: np.ndarray, pad: float) -> np.ndarray:
    """Apply the pad rule; `pad` is a fraction (0.09 = 9 %). Works on floats too."""
    if pad < 0:
        raise ValueError(f"pad must be >= 0, got {pad}")
    return predicted_mib * (1.0 + pad)


def workspace_range(workspace_mb: Any, workspace_max_mb: Any) -> Any:
    """MiB the largest simulated cuDNN workspace may add over the mean of the scenarios
    (`estimator.simulation.workspace`): never negative, 0 where either is unknown (NaN). Arrays or
    floats."""
    return np.fmax(np.asarray(workspace_max_mb, float)
                   - np.fmax(np.asarray(workspace_mb, float), 0.0), 0.0)


def affine_pad(bounds: np.ndarray, predictions: list[np.ndarray],
               workspace_mib: np.ndarray | None = None) -> tuple[float, float]:
    """(E, M): the pad predicted x (1 + E) + M (+ `workspace_mib`) that lifts every row of
    every prediction set to its bound with the least mean over-allocation, E >= `MIN_PAD`,
    M >= 0 MiB.

    For a fixed E the least M is max(0, max(bound - workspace - predicted x (1 + E))), a
    convex, piecewise-linear function of E, and so is the mean over-allocation: a golden
    section search over E finds its minimum, and M is then exact for that E.
    """
    bounds = np.asarray(bounds, float)
    workspace = np.zeros_like(bounds) if workspace_mib is None else np.asarray(workspace_mib, float)
    predicted = np.concatenate([np.asarray(p, float) for p in predictions])
    if predicted.size == 0:
        return MIN_PAD, 0.0
    if np.any(predicted <= 0):
        raise ValueError("predictions must be positive to derive a relative pad")
    actual = np.tile(bounds, len(predictions))
    short = actual - np.tile(workspace, len(predictions)) - predicted

    def mib(fraction: float) -> float:
        return max(0.0, float(np.max(short - predicted * fraction)))

    def over(fraction: float) -> float:  # the mean over-allocation, less a constant
        return float(np.mean((predicted * fraction + mib(fraction)) / actual))

    low, high = MIN_PAD, max(MIN_PAD, float(np.max(short / predicted)))
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(GOLDEN_STEPS):
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if over(left) <= over(right):
            high = right
        else:
            low = left
    fraction = min((low, high, MIN_PAD), key=over)
    return fraction, mib(fraction)


def padded_unseen_family(predicted_mib: Any, workspace_mib: Any, pad: float,
                         pads: dict[str, Any]) -> Any:
    """A model of an unseen family, padded: the largest of `pad` (its GPU type's plain
    pad), the affine family pad and, where `pads` carry it, the workspace range plus its
    own affine pad (see the module docstring). `pads`: an artefact's metadata. Arrays or
    floats."""
    predicted = np.asarray(predicted_mib, float)
    return np.maximum(padded_unseen_gpu(predicted, workspace_mib, pad, pads),
                      affine_family_padded(predicted, pads))


def affine_family_padded(predicted_mib: Any, pads: dict[str, Any]) -> Any:
    """`predicted_mib` with the affine unseen-family pad of `pads` (an artefact's metadata):
    predicted x (1 + ``pad_unseen_family``) + ``pad_unseen_family_mib``."""
    return (np.asarray(predicted_mib, float) * (1.0 + float(pads["pad_unseen_family"]))
            + float(pads.get("pad_unseen_family_mib", 0.0)))


def padded_unseen_gpu(predicted_mib: Any, workspace_mib: Any, pad: float,
                      pads: dict[str, Any]) -> Any:
    """A job of a seen family on a GPU type absent from training: the larger of `pad`
    (``pad_unseen_gpu``) and, where `pads` carry it, the job's workspace range plus its
    affine pad. Arrays or floats."""
    predicted = np.asarray(predicted_mib, float)
    out = predicted * (1.0 + pad)
    if "pad_unseen_family_workspace" not in pads:
        return out
    return np.maximum(out, predicted * (1.0 + float(pads["pad_unseen_family_workspace"]))
                      + float(pads.get("pad_unseen_family_workspace_mib", 0.0))
                      + np.asarray(workspace_mib, float))


def unseen_family_pads(bounds: np.ndarray, by_model: np.ndarray, by_family: np.ndarray,
                       workspace_mib: np.ndarray | None = None) -> dict[str, float]:
    """The unseen-family pads (artefact keys, see the module docstring) from the same rows
    predicted leave one model out and leave one family out; `bounds`: what each padded
    prediction must reach (`lower_bounds`). The workspace pair only with `workspace_mib`."""
    fraction, mib = affine_pad(bounds, [by_model, by_family])
    pads = {"pad_unseen_family": fraction, "pad_unseen_family_mib": mib}
    if workspace_mib is not None:
        fraction, mib = affine_pad(bounds, [by_model, by_family], workspace_mib)
        pads |= {"pad_unseen_family_workspace": fraction, "pad_unseen_family_workspace_mib": mib}
    return pads


def fit_censored(make: Callable[[], Any], X: np.ndarray, y: np.ndarray,
                 censored: np.ndarray | None = None) -> Any:
    """A regressor from `make` fitted on (X, y), where rows marked `censored` hold lower
    bounds: each round their targets become max(prediction, bound x `CENSOR_MARGIN`)
    and the regressor is refitted (an iterative Tobit-style fit). Without censored
    rows it is one plain fit."""
    if censored is None or not np.any(censored):
        return make().fit(X, y)
    censored = np.asarray(censored, bool)
    target = np.asarray(y, float).copy()
    floor = target[censored] * CENSOR_MARGIN
    exact = ~censored
    model = make().fit(X[exact], target[exact]) if exact.sum() >= 2 else None
    target[censored] = floor
    for _ in range(CENSOR_ROUNDS):
        if model is not None:
            target[censored] = np.maximum(model.predict(X[censored]), floor)
        model = make().fit(X, target)
    return model


def held_out_predictions(make: Callable[[], Any], X: np.ndarray, y: np.ndarray,
                         groups: np.ndarray, censored: np.ndarray | None = None) -> np.ndarray:
    """Each row predicted by a regressor fitted without the row's whole group."""
    groups = np.asarray(groups)
    out = np.empty(len(y), dtype=float)
    for group in np.unique(groups):
        test = groups == group
        fit_rows = ~test
        model = fit_censored(make, X[fit_rows], y[fit_rows],
                             None if censored is None else np.asarray(censored)[fit_rows])
        out[test] = model.predict(X[test])
    return out


def held_out_pad(make: Callable[[], Any], X: np.ndarray, y: np.ndarray,
                 groups: np.ndarray, censored: np.ndarray | None = None) -> float:
    """E from leave-one-group-out predictions inside (X, y); a censored row must end
    above its bound x `CENSOR_MARGIN`."""
    if len(np.unique(groups)) < 2:
        raise ValueError("a held-out pad needs at least two groups")
    predictions = held_out_predictions(make, X, y, groups, censored)
    return pad_fraction(lower_bounds(y, censored), predictions)


def lower_bounds(y: np.ndarray, censored: np.ndarray | None) -> np.ndarray:
    """What a padded prediction must reach: the value, or a censored row's bound x margin."""
    bound = np.asarray(y, float).copy()
    if censored is not None:
        bound[np.asarray(censored, bool)] *= CENSOR_MARGIN
    return bound
