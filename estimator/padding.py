"""The OOM pad: padded = prediction x (1 + E), with E from held-out error only.

E is the largest relative under-prediction, (actual - predicted) / predicted,
seen on rows the regressor was not fitted on (`held_out_pad`, leave one group
out inside the training rows). Only under-prediction matters for OOM, so
over-predictions do not widen the pad. In-sample error never gives a safe E.

Three pads per memory artefact, each from its own held-out scheme (training.fit):

* ``pad_seen``: leave one model out (a job of a known family on a known GPU type);
* ``pad_unseen_gpu``: the larger of that and leave one GPU type out;
* ``pad_unseen_family``: the larger of ``pad_seen`` and leave one architecture family
  out: the held-out family plays a model unlike any in the data. With families as
  the exchangeable groups this is split-conformal calibration at the strictest
  level the groups allow (the largest group's error: with k families, a new family's
  error exceeds it with probability at most 1/(k+1)).
* ``pad_unseen_family_workspace``: the same calibration of what is left once the job's
  `workspace_range` is added. A model of an unseen family is padded to the larger of
  ``predicted x (1 + pad_unseen_family)`` and ``predicted x (1 +
  pad_unseen_family_workspace) + workspace_range`` (`padded_unseen_family`): which cuDNN
  algorithm a card picks is not knowable offline, and a family whose convolutions allow
  large workspaces (VGG's wide 224x224 layers) can take the largest one simulated on
  some cards while the families left to calibrate on never do.

`runtime_pad` is the rule that picks among them for one job (the service's
`estimator.predict` applies the same rule; `estimator.evaluation` scores it).

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
    (`estimator.workspace`): never negative, 0 where either is unknown (NaN). Arrays or
    floats."""
    return np.fmax(np.asarray(workspace_max_mb, float)
                   - np.fmax(np.asarray(workspace_mb, float), 0.0), 0.0)


def padded_unseen_family(predicted_mib: Any, workspace_mib: Any, pad: float,
                         pad_workspace: float) -> Any:
    """A model of an unseen family, padded: the larger of the plain pad and the workspace
    margin plus its own pad (see the module docstring). Arrays or floats."""
    predicted = np.asarray(predicted_mib, float)
    return np.maximum(predicted * (1.0 + pad),
                      predicted * (1.0 + pad_workspace) + np.asarray(workspace_mib, float))


def unseen_family_pads(bounds: np.ndarray, by_model: np.ndarray, by_family: np.ndarray,
                       workspace_mib: np.ndarray | None = None) -> tuple[float, float | None]:
    """``pad_unseen_family`` and ``pad_unseen_family_workspace`` (None without
    `workspace_mib`) from the same rows predicted leave one model out and leave one family
    out; `bounds`: what each padded prediction must reach (`lower_bounds`)."""
    pad = max(pad_fraction(bounds, by_model), pad_fraction(bounds, by_family))
    if workspace_mib is None:
        return pad, None
    left = bounds - workspace_mib
    return pad, max(pad_fraction(left, by_model), pad_fraction(left, by_family))


def runtime_pad(pads: dict[str, Any], gpu_seen: bool, family_seen: bool) -> tuple[float, str]:
    """The pad one job gets from an artefact's pads, and why (for the pod's reason).

    A GPU type absent from training takes ``pad_unseen_gpu``, a family absent from
    training ``pad_unseen_family``; both: the larger. Artefacts without a family pad
    count every family as seen.
    """
    pad = float(pads["pad_seen" if gpu_seen else "pad_unseen_gpu"])
    why = "GPU type seen in training" if gpu_seen else "GPU type not seen in training"
    if not family_seen and "pad_unseen_family" in pads:
        pad = max(pad, float(pads["pad_unseen_family"]))
        why += ", model family not seen in training"
    return pad, why


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
