"""Training time on a GPU type seen in fitting: one step's work at that card's own rates.

A step's traced operations (`estimator.simulation.op_costs`, columns ``op_*``) cost on
card g

    step(g) = K k_g + F f_g + B b_g + S s_g,    an epoch: ceil(`EPOCH_SAMPLES` / S) steps

with K the kernels the step launches, F its GFLOPs (convolutions and matrix products), B
the GB its operations move, S its samples (the batch), and four rates per card, each >= 0:
seconds per kernel (launch and dispatch), per GFLOP, per GB, and per sample (the input
pipeline the rows were measured with: the authors' CIFAR-10 loader). They are fitted per
card by non-negative least squares on the relative error of the epoch time
(`estimator.fitting.regressors.CardRatesRegressor`).

Unlike the roofline (`estimator.roofline`), which prices every card from its data sheet
with efficiencies shared by an architecture, nothing here transfers to a card not
fitted: the rates are the card's own, so a card needs rows of its own (the authors' five;
a card profiled with ``schedtune profile``). Classes of operation share one rate per
card: a class's own rate is not identified by models that have little of it (matrix
products are a VGG's, a few percent of anyone else's), and one family held out drove
per-class rates to 20x errors. Numpy only (the service prices with it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from estimator.roofline import EPOCH_SAMPLES

#: Columns the rates read, in this order; the last is the card (the ``gpu_code`` column).
COLUMNS = ("op_kernels", "op_conv_gflops", "op_mm_gflops", "op_conv_gb", "op_mm_gb",
           "op_other_gb", "batch", "gpu_code")
#: What each rate is per, in the order of a card's row of rates.
RATES = ("kernel", "gflop", "gb", "sample")
#: Traced rows a card needs for rates of its own: twice the rates fitted. A card with
#: fewer (one calibration job, a few observed runs) is priced as a card not fitted.
MIN_ROWS = 2 * len(RATES)


def step_work(X: np.ndarray) -> np.ndarray:
    """(rows, 4): kernels, GFLOPs, GB and samples of one step, from `COLUMNS`."""
    X = np.asarray(X, dtype=float)
    kernels, conv_f, mm_f, conv_b, mm_b, other_b, batch = X[:, :7].T
    return np.column_stack([kernels, conv_f + mm_f, conv_b + mm_b + other_b, batch])


def epoch_steps(batch: np.ndarray) -> np.ndarray:
    return np.ceil(EPOCH_SAMPLES / np.asarray(batch, dtype=float))


def epoch_time(X: np.ndarray, cards: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Seconds per epoch of each row (`COLUMNS`) on its card: NaN where the card is not in
    `cards` (codes, one row of `rates` each) or the step was not traced."""
    X = np.asarray(X, dtype=float)
    out = np.full(len(X), np.nan)
    index = {float(c): i for i, c in enumerate(np.asarray(cards, dtype=float))}
    row = np.array([index.get(float(c), -1) for c in X[:, len(COLUMNS) - 1]], dtype=int)
    known = row >= 0
    if known.any():
        work = step_work(X[known])
        out[known] = (work * rates[row[known]]).sum(axis=1) * epoch_steps(X[known, 6])
    return out


def priced(X: np.ndarray, cards: np.ndarray, rates: np.ndarray,
           fallback: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`epoch_time` where it has one, else `fallback` on the columns after `COLUMNS`."""
    out = epoch_time(X[:, :len(COLUMNS)], cards, rates)
    rest = np.isnan(out)
    if rest.any():
        out[rest] = fallback(np.asarray(X, dtype=float)[rest, len(COLUMNS):])
    return out
