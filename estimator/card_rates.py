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

Where a step's mix of work lies within what the card's rows span, each class of operation
has its own rate (`CLASS_RATES`: convolution and matrix-product FLOPs apart, and bytes of
convolutions, matrix products and the rest): a card does not run a matrix product's FLOP
as fast as a convolution's. The mix is three shares (`work_shares`: matrix products' of
the FLOPs and of the bytes, the other operations' of the bytes), and the span their
smallest and largest on the card's rows (`support`). Outside it the pooled rates above
price the step: a class's own rate is not identified by rows that have little of it
(matrix products are a VGG's, a few percent of anyone else's), and with VGG held out the
per-class rates put its steps 20x off (docs/2026-12-07-card-rates.md).

Unlike the roofline (`estimator.roofline`), which prices every card from its data sheet
with efficiencies shared by an architecture, nothing here transfers to a card not
fitted: the rates are the card's own, so a card needs rows of its own (the authors' five;
a card profiled with ``schedtune profile``). Numpy only (the service prices with it).
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
#: What each per-class rate is per (`class_work`'s columns), and the rows a card needs
#: for them: fewer leave the card's support empty (its pooled rates price every step).
CLASS_RATES = ("kernel", "conv gflop", "mm gflop", "conv gb", "mm gb", "other gb", "sample")
MIN_CLASS_ROWS = 2 * len(CLASS_RATES)
#: A step's mix of work (`work_shares`), in this order.
SHARES = ("mm of gflops", "mm of gb", "other of gb")
#: The support of a card without per-class rates: no mix lies in it.
NO_SUPPORT = np.array([[np.inf] * len(SHARES), [-np.inf] * len(SHARES)])


def step_work(X: np.ndarray) -> np.ndarray:
    """(rows, 4): kernels, GFLOPs, GB and samples of one step, from `COLUMNS`."""
    X = np.asarray(X, dtype=float)
    kernels, conv_f, mm_f, conv_b, mm_b, other_b, batch = X[:, :7].T
    return np.column_stack([kernels, conv_f + mm_f, conv_b + mm_b + other_b, batch])


def class_work(X: np.ndarray) -> np.ndarray:
    """(rows, 7): one step's work per class of operation (`CLASS_RATES`), from `COLUMNS`."""
    return np.asarray(X, dtype=float)[:, :len(CLASS_RATES)]


def work_shares(X: np.ndarray) -> np.ndarray:
    """(rows, 3): the step's mix of work (`SHARES`; 0 where it has no FLOPs or bytes)."""
    _, conv_f, mm_f, conv_b, mm_b, other_b, _ = class_work(X).T
    flops, gb = conv_f + mm_f, conv_b + mm_b + other_b
    return np.column_stack([np.divide(part, whole, out=np.zeros_like(part), where=whole > 0)
                            for part, whole in ((mm_f, flops), (mm_b, gb), (other_b, gb))])


def support(X: np.ndarray) -> np.ndarray:
    """(2, 3): the smallest and largest of each share over a card's rows."""
    shares = work_shares(X)
    return np.stack([shares.min(axis=0), shares.max(axis=0)])


def epoch_steps(batch: np.ndarray) -> np.ndarray:
    return np.ceil(EPOCH_SAMPLES / np.asarray(batch, dtype=float))


def epoch_time(X: np.ndarray, cards: np.ndarray, rates: np.ndarray,
               class_rates: np.ndarray | None = None,
               supports: np.ndarray | None = None) -> np.ndarray:
    """Seconds per epoch of each row (`COLUMNS`) on its card: NaN where the card is not in
    `cards` (codes, one row of `rates` each) or the step was not traced. With
    `class_rates` (one row of `CLASS_RATES` per card) and `supports` (one `support` per
    card), a step whose mix lies in its card's support is priced per class."""
    X = np.asarray(X, dtype=float)
    out = np.full(len(X), np.nan)
    index = {float(c): i for i, c in enumerate(np.asarray(cards, dtype=float))}
    row = np.array([index.get(float(c), -1) for c in X[:, len(COLUMNS) - 1]], dtype=int)
    known = row >= 0
    if known.any():
        card, steps = row[known], epoch_steps(X[known, 6])
        step = (step_work(X[known]) * rates[card]).sum(axis=1)
        if class_rates is not None and len(class_rates):
            shares, span = work_shares(X[known]), supports[card]
            inside = ((shares >= span[:, 0]) & (shares <= span[:, 1])).all(axis=1)
            per_class = (class_work(X[known]) * class_rates[card]).sum(axis=1)
            step = np.where(inside, per_class, step)
        out[known] = step * steps
    return out


def priced(X: np.ndarray, cards: np.ndarray, rates: np.ndarray,
           fallback: Callable[[np.ndarray], np.ndarray],
           class_rates: np.ndarray | None = None,
           supports: np.ndarray | None = None) -> np.ndarray:
    """`epoch_time` where it has one, else `fallback` on the columns after `COLUMNS`."""
    out = epoch_time(X[:, :len(COLUMNS)], cards, rates, class_rates, supports)
    rest = np.isnan(out)
    if rest.any():
        out[rest] = fallback(np.asarray(X, dtype=float)[rest, len(COLUMNS):])
    return out
