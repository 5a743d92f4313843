import numpy as np
import pytest

from estimator.padding import (
    MIN_PAD, affine_pad, held_out_pad, pad_fraction, padded, padded_unseen_family, workspace_range,
)  # fmt: skip
from estimator.fitting.regressors import ColumnRegressor


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


def test_censored_rows_are_lifted_above_their_bounds() -> None:
    from estimator.padding import CENSOR_MARGIN, fit_censored
    from estimator.fitting.regressors import ResidualPeakRegressor

    # An anchor 1000 MiB short on one GPU; two runs on that GPU were killed at 1200 MiB
    # above the anchor (their true peak is higher still).
    base = np.linspace(1000, 5000, 30)
    X = np.column_stack([base, np.zeros(30)])
    y = base + 500.0
    censored = np.zeros(30, bool)
    censored[[10, 20]] = True
    y[censored] = base[censored] + 1200.0
    make = lambda: ResidualPeakRegressor(relative=False, n_estimators=0)  # noqa: E731
    plain = make().fit(X[~censored], y[~censored])
    assert np.all(plain.predict(X[censored]) < y[censored])
    # A forest fitted Tobit-style learns the killed jobs' extra need: in-sample it moves
    # more than half way from the plain fit to bound x margin (bootstrap averages the rest).
    forest = lambda: ResidualPeakRegressor(relative=False, min_samples_leaf=1)  # noqa: E731
    before = forest().fit(X[~censored], y[~censored]).predict(X[censored])
    after = fit_censored(forest, X, y, censored).predict(X[censored])
    assert np.all(after - before > 0.5 * (y[censored] * CENSOR_MARGIN - before))
    # The pad covers the bounds (x margin) on held-out predictions.
    groups = np.arange(30) % 5
    pad = held_out_pad(make, X, y, groups, censored)
    preds = np.array([fit_censored(make, X[groups != g], y[groups != g], censored[groups != g])
                      .predict(X[groups == g]) for g in range(5)])
    assert pad >= max(y[c] * CENSOR_MARGIN / preds[c % 5, c // 5] - 1 for c in (10, 20)) - 1e-9
    assert pad > held_out_pad(make, X, y, groups)  # read as exact values, a smaller pad


def test_the_workspace_range_is_never_negative_and_unknown_parts_count_safely() -> None:
    mean = np.array([100.0, -20.0, 50.0, np.nan, 10.0])
    worst = np.array([400.0, 100.0, 40.0, 300.0, np.nan])
    assert workspace_range(mean, worst).tolist() == [300.0, 100.0, 0.0, 300.0, 0.0]
    assert workspace_range(0.0, 8.0) == 8.0


def test_an_unseen_family_is_padded_by_the_largest_of_the_three_rules() -> None:
    pads = {"pad_unseen_family": 0.1, "pad_unseen_family_mib": 200.0,
            "pad_unseen_family_workspace": 0.05, "pad_unseen_family_workspace_mib": 20.0}
    predicted, workspace = np.array([1000.0, 1000.0, 5000.0]), np.array([0.0, 400.0, 0.0])
    out = padded_unseen_family(predicted, workspace, pad=0.1, pads=pads)
    # the affine family pad; the workspace margin; the GPU type's own pad (5000 x 1.1 = 5500
    # is below 5000 x 1.1 + 200, so the affine pad still decides)
    assert out.tolist() == pytest.approx([1300.0, 1470.0, 5700.0])
    assert padded_unseen_family(1000.0, 0.0, 0.5, pads) == pytest.approx(1500.0)
    # artefacts without the MiB part or the workspace pair: a plain fraction
    assert padded_unseen_family(1000.0, 400.0, 0.1, {"pad_unseen_family": 0.3}) == 1300.0


def test_the_affine_pad_covers_every_row_with_the_least_over_allocation() -> None:
    """A MiB-sized residual (the context) on jobs of every size: a pure fraction must be
    large enough for the smallest job; the affine pad covers all at less cost."""
    rng = np.random.default_rng(0)
    predicted = [rng.uniform(500, 20000, 200) for _ in range(2)]
    bounds = predicted[0] + rng.uniform(-300, 300, 200)
    fraction, mib = affine_pad(bounds, predicted)
    assert fraction >= MIN_PAD and mib >= 0
    for p in predicted:
        assert np.all(p * (1 + fraction) + mib >= bounds - 1e-6)
        assert np.min(p * (1 + fraction) + mib - bounds) < 1e-6 or fraction == MIN_PAD

    def over(e: float, m: float) -> float:
        return float(np.mean([np.mean((p * (1 + e) + m - bounds) / bounds) for p in predicted]))

    # no covering (E, M) on a grid does better, the pure fraction much worse
    grid = [(e, max(0.0, max(float(np.max(bounds - p * (1 + e))) for p in predicted)))
            for e in np.linspace(MIN_PAD, 1.0, 2000)]
    assert over(fraction, mib) <= min(over(e, m) for e, m in grid) + 1e-9
    pure = max(pad_fraction(bounds, p) for p in predicted)
    assert over(fraction, mib) < 0.5 * over(pure, 0.0)
    # a workspace range is added, not covered by the pad
    workspace = np.full(200, 100.0)
    assert affine_pad(bounds + workspace, predicted, workspace) == pytest.approx((fraction, mib))
    # predictions above their bounds: the floor, no MiB
    assert affine_pad(np.array([50.0]), [np.array([100.0])]) == (MIN_PAD, 0.0)
    with pytest.raises(ValueError, match="positive"):
        affine_pad(np.array([50.0]), [np.array([0.0])])
