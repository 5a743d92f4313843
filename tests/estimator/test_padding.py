import numpy as np
import pytest

from estimator.padding import MIN_PAD, held_out_pad, pad_fraction, padded
from estimator.regressors import ColumnRegressor


def test_pad_is_the_largest_relative_under_prediction() -> None:
    actual = np.array([110.0, 90.0, 200.0])
    predicted = np.array([100.0, 100.0, 160.0])
    pad = pad_fraction(actual, predicted)
    assert pad == pytest.approx(0.25)
    assert np.all(padded(predicted, pad) >= actual - 1e-9)


def test_over_prediction_never_shrinks_the_pad_below_the_floor() -> None:
    assert pad_fraction(np.array([50.0]), np.array([100.0])) == MIN_PAD
    with pytest.raises(ValueError):
        padded(np.array([1.0]), -0.1)


def test_held_out_pad_comes_from_rows_outside_the_fit() -> None:
    # A regressor that echoes column 0; group "b" is under-predicted by 50 %.
    X = np.array([[100.0], [100.0], [100.0], [100.0]])
    y = np.array([100.0, 100.0, 150.0, 150.0])
    groups = np.array(["a", "a", "b", "b"])
    assert held_out_pad(ColumnRegressor, X, y, groups) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="two groups"):
        held_out_pad(ColumnRegressor, X, y, np.zeros(4))
