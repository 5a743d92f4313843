"""A seen card's training time from its own rates (`estimator.card_rates`)."""

from pathlib import Path

import numpy as np
import pytest

from estimator import card_rates
from estimator.fitting.compiling import compile_regressor
from estimator.fitting.regressors import CardRatesRegressor

MEASURED_H200 = Path(__file__).resolve().parents[2] / "profiles" / "measured" / "H200.csv"
# Seconds per kernel, GFLOP, GB and sample on two cards (a slow one and a fast one).
RATES = {0.0: [40e-6, 2e-4, 4e-3, 2e-4], 3.0: [10e-6, 3e-5, 1e-3, 5e-5]}


def _rows(rng: np.random.Generator, card: float, n: int) -> np.ndarray:
    """`card_rates.COLUMNS` and one fallback column (the batch) for `n` random steps."""
    batch = rng.choice([8.0, 16.0, 32.0, 64.0], n)
    ops = np.column_stack([rng.uniform(50, 3000, n),  # kernels
                           rng.uniform(1, 50, n) * batch, rng.uniform(0, 5, n) * batch,
                           rng.uniform(0.1, 2, n) * batch, rng.uniform(0, 0.5, n),
                           rng.uniform(0.1, 1, n) * batch])
    return np.column_stack([ops, batch, np.full(n, card), batch])


def _epoch(X: np.ndarray) -> np.ndarray:
    work = card_rates.step_work(X)
    rates = np.array([RATES[c] for c in X[:, len(card_rates.COLUMNS) - 1]])
    return (work * rates).sum(axis=1) * card_rates.epoch_steps(X[:, 6])


def test_too_few_columns_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="card_rates.COLUMNS"):
        CardRatesRegressor().fit(np.ones((10, 7)), np.ones(10))


def test_each_card_gets_its_own_rates_and_others_the_fallback() -> None:
    rng = np.random.default_rng(0)
    X = np.vstack([_rows(rng, 0.0, 30), _rows(rng, 3.0, 30)])
    model = CardRatesRegressor().fit(X, _epoch(X))
    assert model.cards_.tolist() == [0.0, 3.0]
    for card, rates in zip(model.cards_, model.rates_, strict=True):
        assert rates == pytest.approx(RATES[card], rel=1e-6)
    new = _rows(rng, 0.0, 5)
    assert model.predict(new) == pytest.approx(_epoch(new), rel=1e-9)
    # A card not fitted and a step not traced are the fallback's (here: log-linear in
    # the batch alone), whatever the rates say.
    unseen, untraced = _rows(rng, 7.0, 1), _rows(rng, 3.0, 1)
    untraced[:, :6] = np.nan
    both = np.vstack([unseen, untraced])
    assert model.predict(both) == pytest.approx(model.fallback_.predict(both[:, 8:]))


def test_a_card_with_few_rows_gets_no_rates_of_its_own() -> None:
    rng = np.random.default_rng(1)
    X = np.vstack([_rows(rng, 0.0, 30), _rows(rng, 3.0, card_rates.MIN_ROWS - 1)])
    model = CardRatesRegressor().fit(X, _epoch(X))
    assert model.cards_.tolist() == [0.0]


def test_rates_are_never_negative() -> None:
    """A rate below zero would make a bigger step faster; the fit holds each at >= 0 even
    when the rows pull one below (here the time falls with the kernels)."""
    rng = np.random.default_rng(2)
    X = _rows(rng, 0.0, 40)
    y = _epoch(X) * (2.0 - X[:, 0] / 3000.0)
    assert (CardRatesRegressor().fit(X, y).rates_ >= 0).all()


def test_the_numpy_form_predicts_what_the_fitted_one_does() -> None:
    rng = np.random.default_rng(3)
    X = np.vstack([_rows(rng, 0.0, 30), _rows(rng, 3.0, 30), _rows(rng, 5.0, 2)])
    y = _epoch(np.vstack([X[:60], _rows(rng, 0.0, 2)])) * rng.uniform(0.9, 1.1, 62)
    X[60:, :6] = np.where(rng.random((2, 6)) < 0.5, np.nan, X[60:, :6])
    fitted = CardRatesRegressor().fit(X, y)
    assert compile_regressor(fitted).predict(X).tolist() == fitted.predict(X).tolist()


def test_one_calibration_job_leaves_the_card_to_the_roofline(data_dir, tmp_path) -> None:
    """The H200 with one profiled job (`CALIBRATION_JOB`, one row): its training time is
    the roofline's, as for a card never profiled, not the time artefact's, which has no
    rates of its own for it; with all its 108 training rows, its own rates price it."""
    import shutil

    from estimator import portable
    from estimator.fitting import artefacts
    from estimator.fitting.evaluation import CALIBRATION_JOB
    from estimator.fitting.training import fit
    from estimator.predict import Estimator, Job
    from estimator.reference.tables import load_target

    rows = load_target("train-time", data_dir, measurements=MEASURED_H200)
    h200 = rows["gpu"] == "H200"
    one = h200 & (rows["model"] == CALIBRATION_JOB[0]) & (rows["batch"] == CALIBRATION_JOB[1])
    job = Job("vgg16", "train", 32, 1)
    served = Estimator.load()
    roofline = served.estimate(job)["H200"].predicted_s
    times = {}
    for name, frame in (("one job", rows[~h200 | one]), ("every row", rows)):
        directory = tmp_path / name.replace(" ", "-")
        shutil.copytree(portable.MODELS_DIR, directory)
        regressor, meta = fit("train-time", "ours", frame.reset_index(drop=True),
                              with_stats=False)
        artefacts.save("train-time.ours", regressor, meta, directory)
        assert ("H200" in meta["priced_gpus"]) == (name == "every row")
        assert "H200" in meta["seen_gpus"]
        times[name] = Estimator.load(models_dir=directory).estimate(job)["H200"].predicted_s
    assert times["one job"] == pytest.approx(roofline)
    assert times["every row"] != pytest.approx(roofline)


def _class_epoch(X: np.ndarray, rates: list[float]) -> np.ndarray:
    return (card_rates.class_work(X) * rates).sum(axis=1) * card_rates.epoch_steps(X[:, 6])


def test_a_step_whose_mix_the_card_spans_is_priced_per_class_and_any_other_pooled() -> None:
    """A card that runs a matrix product's FLOP 4x slower than a convolution's: its rows'
    mix of work is learned with a rate per class; a step with more matrix-product work than
    any row of the card had (a transformer's, beside convolutional nets) lies outside the
    span and is priced by the pooled rates, never by a per-class rate the rows could not
    pin down."""
    rng = np.random.default_rng(4)
    truth = [20e-6, 5e-5, 2e-4, 2e-3, 2e-3, 4e-3, 1e-4]  # `card_rates.CLASS_RATES`
    X = _rows(rng, 0.0, 40)
    model = CardRatesRegressor().fit(X, _class_epoch(X, truth))
    assert model.class_rates_[0] == pytest.approx(truth, rel=1e-6)
    span = model.supports_[0]
    assert (span[0] <= span[1]).all()
    inside = _rows(rng, 0.0, 20)
    shares = card_rates.work_shares(inside)
    inside = inside[((shares >= span[0]) & (shares <= span[1])).all(axis=1)]
    assert len(inside) and model.predict(inside) == pytest.approx(_class_epoch(inside, truth))
    beyond = inside[:1].copy()
    beyond[:, 2] = 50 * beyond[:, 1]  # matrix products 98 % of the FLOPs
    assert card_rates.work_shares(beyond)[0, 0] > span[1, 0]
    pooled = (card_rates.step_work(beyond) * model.rates_[0]).sum() * \
        card_rates.epoch_steps(beyond[:, 6])
    assert model.predict(beyond) == pytest.approx(pooled)


def test_a_card_with_rows_for_pooled_rates_only_prices_every_step_pooled() -> None:
    rng = np.random.default_rng(5)
    X = _rows(rng, 0.0, card_rates.MIN_CLASS_ROWS - 1)
    model = CardRatesRegressor().fit(X, _epoch(X) * rng.uniform(0.9, 1.1, len(X)))
    assert model.cards_.tolist() == [0.0] and not model.class_rates_.any()
    pooled = (card_rates.step_work(X) * model.rates_[0]).sum(axis=1) * \
        card_rates.epoch_steps(X[:, 6])
    assert model.predict(X) == pytest.approx(pooled)


def test_an_artefact_saved_before_the_per_class_rates_loads_with_pooled_rates_only() -> None:
    from estimator.portable import CardRates

    rng = np.random.default_rng(6)
    X = _rows(rng, 0.0, 30)
    compiled = compile_regressor(CardRatesRegressor().fit(X, _epoch(X)))
    arrays = {k: v for k, v in compiled.to_arrays("").items()
              if k not in ("class_rates", "supports")}
    older = CardRates.from_arrays(arrays, "")
    assert older.class_rates is None
    assert older.predict(X) == pytest.approx(_epoch(X), rel=1e-6)


def test_cards_equally_short_of_rows_are_priced_by_the_artefact(data_dir) -> None:
    """The authors' inference rows are one batch per model: with the ResNets held out (the
    one-family-out world's folds), each card has 7, fewer than `card_rates.MIN_ROWS`, and
    all as many as the artefact has for any card; the artefact prices them all (the
    roofline prices a card only where the artefact has fewer rows of it than of others)."""
    from estimator.fitting.evaluation import families
    from estimator.fitting.training import fit
    from estimator.reference.tables import load_target

    rows = load_target("infer-time", data_dir, measurements="none")
    rows = rows[families(rows) != "resnet"].reset_index(drop=True)
    per_card = rows["gpu"].value_counts()
    assert (per_card < card_rates.MIN_ROWS).all() and per_card.nunique() == 1
    _, meta = fit("infer-time", "ours", rows, with_stats=False)
    assert meta["priced_gpus"] == sorted(per_card.index)
