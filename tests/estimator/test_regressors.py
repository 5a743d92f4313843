import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from estimator.fitting.regressors import ColumnRegressor, ResidualPeakRegressor


@parametrize_with_checks([ResidualPeakRegressor(n_estimators=5), ColumnRegressor()])
def test_sklearn_compatible(estimator, check) -> None:
    check(estimator)


def test_residual_regressor_learns_per_gpu_constants_and_flags_unseen() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(200, 2000, 200)
    gpu = rng.integers(0, 3, 200).astype(float)
    y = base * 1.1 + np.array([300.0, 500.0, 700.0])[gpu.astype(int)]
    X = np.column_stack([base, gpu])
    model = ResidualPeakRegressor(random_state=0).fit(X, y)
    assert model.predict(X) == pytest.approx(y, rel=0.05)
    unseen = np.array([[1000.0, 9.0]])
    assert model.seen(unseen).tolist() == [False]
    assert model.unseen_offset_ == max(model.offsets_.values())
    assert clone(model).get_params()["random_state"] == 0


def test_absolute_residual_corrects_in_target_units() -> None:
    # The anchor misses a constant 400 MiB on half the rows. Fitted on small jobs, the
    # absolute correction carries the same 400 MiB to a big one; a relative one scales it.
    base = np.linspace(500, 1000, 40)
    flag = np.arange(40) % 2
    y = base + 100 + 400.0 * flag
    X = np.column_stack([base, np.zeros(40), flag])
    big = np.array([[5000.0, 0.0, 1.0]])
    absolute = ResidualPeakRegressor(relative=False, min_samples_leaf=1).fit(X, y)
    offset = absolute.offsets_[0.0]
    assert offset == pytest.approx(np.median(y - base))
    assert absolute.predict(big)[0] == pytest.approx(5000 + 100 + 400, abs=1.0)
    relative = ResidualPeakRegressor(min_samples_leaf=1).fit(X, y)
    assert relative.predict(big)[0] > absolute.predict(big)[0] + 500  # 400 MiB scaled up


@parametrize_with_checks([ResidualPeakRegressor(n_estimators=0)])
def test_anchor_only_is_sklearn_compatible(estimator, check) -> None:
    check(estimator)


def test_anchor_only_predicts_anchor_plus_per_gpu_median() -> None:
    X = np.array([[100.0, 0.0], [200.0, 0.0], [300.0, 1.0], [400.0, 1.0], [500.0, 1.0]])
    y = np.array([150.0, 260.0, 400.0, 520.0, 600.0])
    model = ResidualPeakRegressor(relative=False, n_estimators=0).fit(X, y)
    assert model.forest_ is None
    assert model.predict(np.array([[1000.0, 0.0], [1000.0, 1.0]])).tolist() == [1055.0, 1100.0]
