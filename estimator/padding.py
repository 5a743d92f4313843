"""The OOM pad: padded = prediction x (1 + E), with E from held-out error only.

E is the largest relative under-prediction, (actual - predicted) / predicted,
seen on rows the regressor was not fitted on (`held_out_pad`, leave one group
out inside the training rows). Only under-prediction matters for OOM, so
over-predictions do not widen the pad. In-sample error never gives a safe E.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.model_selection import LeaveOneGroupOut

#: Floor on E so that a lucky fit never yields a zero pad.
MIN_PAD = 0.02


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


def held_out_predictions(make: Callable[[], RegressorMixin], X: np.ndarray, y: np.ndarray,
                         groups: np.ndarray) -> np.ndarray:
    """Each row predicted by a regressor fitted without the row's whole group."""
    out = np.empty(len(y), dtype=float)
    for fit_idx, test_idx in LeaveOneGroupOut().split(X, y, groups):
        out[test_idx] = make().fit(X[fit_idx], y[fit_idx]).predict(X[test_idx])
    return out


def held_out_pad(make: Callable[[], RegressorMixin], X: np.ndarray, y: np.ndarray,
                 groups: np.ndarray) -> float:
    """E from leave-one-group-out predictions inside (X, y)."""
    if len(np.unique(groups)) < 2:
        raise ValueError("a held-out pad needs at least two groups")
    return pad_fraction(y, held_out_predictions(make, X, y, groups))
