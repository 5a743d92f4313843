"""Regressors (scikit-learn compatible) and the named designs compared per target.

* `ResidualPeakRegressor` (ours, memory): an analytic anchor (column `base_col`:
  the simulated device memory, `estimator.simulation.workspace`: the training loop's
  allocations and frees replayed through a model of PyTorch's caching allocator,
  with cuDNN workspaces) plus a per-GPU constant (median over that GPU's rows,
  column `group_col` identifies the GPU: the CUDA context and libraries), corrected
  by a random forest fitted on what is left (in MiB for training memory, relative
  for inference memory; ``n_estimators=0``: no forest). The forest only corrects the
  anchor, so it cannot wander far on a model it has never seen. A GPU never seen
  in fitting gets the largest known constant (the safe side) and is reported as
  unseen.
* The paper's design: a random forest over activations, parameters, input and
  GPU characteristics (Table V: CUDA cores, bandwidth, SMs for training memory;
  all five for the other predictors).
* torchinfo's "Estimated Total Size" (no fitting), the paper's Table IV baseline.
* `CardRatesRegressor` (ours, training time): `estimator.card_rates`, each fitted card's
  own rates for a step's work, a regressor for the rest; `RooflineRegressor`: the time
  from the hardware (`estimator.roofline`).

Every design maps a DataFrame (`estimator.reference.tables`) to a matrix through its
`columns`; the regressors only see numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, nnls
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils import Tags
from sklearn.utils.validation import check_is_fitted, validate_data

from estimator import card_rates, roofline
from estimator.catalogue import CHARACTERISTICS

#: The paper's fixed pad (Table V, training memory max error), for its baseline.
PAPER_PAD = 0.0898


class ResidualPeakRegressor(RegressorMixin, BaseEstimator):
    """anchor * (1 + forest(X)), or with ``relative=False`` anchor + forest(X), where
    anchor = X[:, base_col] + offset[X[:, group_col]] and the forest sees every column
    but the group.

    Learned state: `offsets_` (group -> constant, target units),
    `unseen_offset_` (used for groups not seen in fitting) and `forest_`.
    """

    def __init__(self, base_col: int = 0, group_col: int | None = 1, per_group_scale: bool = False,
                 n_estimators: int = 100, min_samples_leaf: int = 2, max_features: float = 1.0,
                 random_state: int | None = 0, relative: bool = True) -> None:
        self.relative = relative
        self.base_col = base_col
        self.group_col = group_col
        self.per_group_scale = per_group_scale
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> ResidualPeakRegressor:
        X, y = validate_data(self, X, y, y_numeric=True)
        y = y.astype(float)
        needed = 1 + max(self.base_col, -1 if self.group_col is None else self.group_col)
        if X.shape[1] < needed:
            raise ValueError(f"got {X.shape[1]} feature(s); base_col and group_col need {needed}")
        base, groups = self._split(X)
        self.scales_ = {g: self._scale(base[groups == g], y[groups == g]) for g in np.unique(groups)}
        self.offsets_ = {
            g: float(np.median(y[groups == g] - self.scales_[g] * base[groups == g]))
            for g in np.unique(groups)
        }
        self.unseen_offset_ = max(self.offsets_.values())
        self.unseen_scale_ = max(self.scales_.values())
        anchor = self._anchor(base, groups)
        if self.relative:
            residual = np.divide(y, anchor, out=np.ones_like(y), where=np.abs(anchor) > 1e-9) - 1.0
        else:
            residual = y - anchor
        self.forest_ = None if self.n_estimators == 0 else RandomForestRegressor(
            n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
            max_features=self.max_features, random_state=self.random_state, n_jobs=1,
        ).fit(self._forest_input(X), residual)  # fmt: skip
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "offsets_")
        X = validate_data(self, X, reset=False)
        base, groups = self._split(X)
        correction = (np.zeros(len(X)) if self.forest_ is None
                      else self.forest_.predict(self._forest_input(X)))
        anchor = self._anchor(base, groups)
        return anchor * (1.0 + correction) if self.relative else anchor + correction

    def seen(self, X: np.ndarray) -> np.ndarray:
        """Per row: was its group (GPU) seen in fitting."""
        check_is_fitted(self, "offsets_")
        _, groups = self._split(np.asarray(X, dtype=float))
        return np.array([g in self.offsets_ for g in groups], dtype=bool)

    def _split(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        groups = X[:, self.group_col] if self.group_col is not None else np.zeros(len(X))
        return X[:, self.base_col], groups

    def _scale(self, base: np.ndarray, y: np.ndarray) -> float:
        """Per-GPU slope of target on the anchor (1 unless `per_group_scale`)."""
        if not self.per_group_scale or len(base) < 3 or np.ptp(base) <= 0:
            return 1.0
        return float(max(0.5, np.polyfit(base, y, 1)[0]))

    def _anchor(self, base: np.ndarray, groups: np.ndarray) -> np.ndarray:
        offsets = np.array([self.offsets_.get(g, self.unseen_offset_) for g in groups])
        scales = np.array([self.scales_.get(g, self.unseen_scale_) for g in groups])
        return scales * base + offsets

    def _forest_input(self, X: np.ndarray) -> np.ndarray:
        drop = {self.group_col} if self.group_col is not None else set()
        keep = [i for i in range(X.shape[1]) if i not in drop]
        return X[:, keep]


class RooflineRegressor(RegressorMixin, BaseEstimator):
    """`estimator.roofline`'s time per row, its parameters fitted by least squares on the
    log of the time.

    Learned: `pooled_` (z_e, z_m, log kappa, log b, log h; an efficiency is a logistic of
    its z, so never above its bound) and `deviation_` (architecture code -> (delta z_e,
    delta z_m)), shrunk towards 0 by `shrinkage`; `memory_prior` and `prior_weight` hold the
    pooled memory efficiency near a share of the data sheet's bandwidth (0: free).
    """

    def __init__(self, shrinkage: float = 1.0, memory_prior: float = 0.75,
                 prior_weight: float = 0.0) -> None:
        self.shrinkage = shrinkage
        self.memory_prior = memory_prior
        self.prior_weight = prior_weight

    def fit(self, X: np.ndarray, y: np.ndarray) -> RooflineRegressor:
        X, y = validate_data(self, X, y, y_numeric=True)
        archs = [int(a) for a in np.unique(X[:, roofline.COLUMNS.index("architecture_code")])]

        def unpack(theta: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
            return theta[:5], {a: theta[5 + 2 * i: 7 + 2 * i] for i, a in enumerate(archs)}

        def residuals(theta: np.ndarray) -> np.ndarray:
            pooled, deviation = unpack(theta)
            fit = np.log(roofline.unit_time(X, pooled, deviation)) - np.log(y)
            prior = np.sqrt(self.prior_weight) * (pooled[1] - roofline.logit(self.memory_prior))
            return np.concatenate([fit, [prior], np.sqrt(self.shrinkage) * theta[5:]])

        start = np.concatenate([[0.0, 0.0], np.log([10e-6, 1e-3, 1e-4]), np.zeros(2 * len(archs))])
        pooled, deviation = unpack(least_squares(residuals, start, method="trf").x)
        self.pooled_ = pooled.copy()
        self.deviation_ = {a: d.copy() for a, d in deviation.items()}
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "pooled_")
        return roofline.unit_time(validate_data(self, X, reset=False), self.pooled_,
                                  self.deviation_)

    def efficiencies(self) -> dict[str, dict[str, float]]:
        """The learned figures, pooled and per architecture seen."""
        check_is_fitted(self, "pooled_")
        return {"pooled": roofline.efficiencies(self.pooled_, np.zeros(2)),
                **{roofline.ARCHITECTURES[code]: roofline.efficiencies(self.pooled_, d)
                   for code, d in sorted(self.deviation_.items())}}


class CardRatesRegressor(RegressorMixin, BaseEstimator):
    """`estimator.card_rates`: per card with `card_rates.MIN_ROWS` traced rows, four rates
    fitted by non-negative least squares on the relative error of the epoch time, and with
    `card_rates.MIN_CLASS_ROWS`, a rate per class of operation for the steps whose mix of
    work its rows span. Rows on any other card, or whose step was not traced (a user's
    model registered without its operations), are priced by `fallback` (default: the
    log-linear regression; fitted on every row), which reads the columns after
    `card_rates.COLUMNS`.

    Learned: `cards_` (GPU codes), `rates_` (one row of `card_rates.RATES` per card),
    `class_rates_` (one row of `card_rates.CLASS_RATES` per card), `supports_` (one
    `card_rates.support` per card) and `fallback_`."""

    def __init__(self, fallback: BaseEstimator | None = None) -> None:
        self.fallback = fallback

    def fit(self, X: np.ndarray, y: np.ndarray) -> CardRatesRegressor:
        X, y = validate_data(self, X, y, y_numeric=True, ensure_all_finite="allow-nan")
        n = len(card_rates.COLUMNS)
        if X.shape[1] <= n:
            raise ValueError(f"got {X.shape[1]} columns: card_rates.COLUMNS ({n}), then the "
                             "fallback's")
        traced = ~np.isnan(X[:, :n]).any(axis=1)
        cards, rates, class_rates, supports = [], [], [], []
        for card in np.unique(X[traced, n - 1]):
            rows = traced & (X[:, n - 1] == card)
            if rows.sum() < card_rates.MIN_ROWS:
                continue
            cards.append(card)
            rates.append(_relative_nnls(card_rates.step_work(X[rows]), X[rows, 6], y[rows]))
            if rows.sum() < card_rates.MIN_CLASS_ROWS:
                class_rates.append(np.zeros(len(card_rates.CLASS_RATES)))
                supports.append(card_rates.NO_SUPPORT)
                continue
            class_rates.append(_relative_nnls(card_rates.class_work(X[rows]), X[rows, 6],
                                              y[rows]))
            supports.append(card_rates.support(X[rows]))
        self.cards_ = np.array(cards, dtype=float)
        self.rates_ = np.array(rates, dtype=float).reshape(-1, len(card_rates.RATES))
        self.class_rates_ = np.array(class_rates, dtype=float).reshape(
            -1, len(card_rates.CLASS_RATES))
        self.supports_ = np.array(supports, dtype=float).reshape(-1, 2, len(card_rates.SHARES))
        self.fallback_ = clone(self.fallback if self.fallback is not None else _log_linear())
        self.fallback_.fit(X[:, n:], y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "rates_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan")
        return card_rates.priced(X, self.cards_, self.rates_, self.fallback_.predict,
                                 self.class_rates_, self.supports_)

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def _relative_nnls(step_work: np.ndarray, batch: np.ndarray, epoch_s: np.ndarray) -> np.ndarray:
    """Rates >= 0, one per column of `step_work`, least squares on the epochs' relative error."""
    work = step_work * card_rates.epoch_steps(batch)[:, None]
    rates, _ = nnls(work / epoch_s[:, None], np.ones(len(epoch_s)))
    return rates


class ColumnRegressor(RegressorMixin, BaseEstimator):
    """Predicts one input column as it is (a formula baseline such as torchinfo's)."""

    def __init__(self, col: int = 0) -> None:
        self.col = col

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # a formula, not a fit
        return tags

    def fit(self, X: np.ndarray, y: np.ndarray) -> ColumnRegressor:
        validate_data(self, X, y, y_numeric=True)
        self.fitted_ = True
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "fitted_")
        return validate_data(self, X, reset=False)[:, self.col].astype(float)


def _absolute_residual(min_samples_leaf: int = 1) -> Callable[[], ResidualPeakRegressor]:
    def make() -> ResidualPeakRegressor:
        return ResidualPeakRegressor(relative=False, min_samples_leaf=min_samples_leaf)

    return make


def _anchor_only() -> ResidualPeakRegressor:
    return ResidualPeakRegressor(relative=False, n_estimators=0)


def _paper_rfr() -> RandomForestRegressor:
    return RandomForestRegressor(n_estimators=100, random_state=0, n_jobs=1)


def _log_forest() -> TransformedTargetRegressor:
    return TransformedTargetRegressor(
        regressor=RandomForestRegressor(n_estimators=200, min_samples_leaf=1, random_state=0,
                                        n_jobs=1),
        func=np.log, inverse_func=np.exp,
    )  # fmt: skip


def _log_linear() -> TransformedTargetRegressor:
    """log(target) linear in log(features): extrapolates to bigger models and GPUs."""
    return TransformedTargetRegressor(
        regressor=make_pipeline(FunctionTransformer(np.log1p), StandardScaler(),
                                RidgeCV(alphas=np.logspace(-3, 2, 12))),
        func=np.log, inverse_func=np.exp,
    )  # fmt: skip


@dataclass(frozen=True)
class Design:
    """A named estimator design for one target.

    `pad` is ``"held-out"`` (E from nested held-out error, `estimator.padding`)
    or a fixed fraction (the paper's published 8.98 %). `fit_target`: the target whose
    rows the design is fitted on, when not its own (a time model fitted on training steps
    and asked for inference passes).
    """

    name: str
    columns: tuple[str, ...]
    make: Callable[[], RegressorMixin]
    pad: str | float = "held-out"
    fit_target: str | None = None

    @property
    def workspace_margin(self) -> bool:
        """Whether a model of an unseen family also gets the workspace margin
        (`estimator.padding.padded_unseen_family`): held-out pads of designs anchored on
        the simulated device memory, whose workspace is the scenarios' mean."""
        return isinstance(self.pad, str) and "sim_device_mb" in self.columns


GPU_COLS = CHARACTERISTICS
PAPER_MEM_GPU_COLS = ("cuda_cores", "mem_bandwidth_gbs", "sm_count")  # Table V, (1,3,4)
#: The time regressions' columns: the model's size and work, the GPU's descriptors.
TIME_COLUMNS = ("sim_gflops", "batch", "params_mb", "activations_mb", *GPU_COLS)
SIM_COLS = ("sim_params_mb", "sim_grads_mb", "sim_activations_mb", "sim_temp_mb",
            "sim_optimizer_mb", "params_mb", "activations_mb", "batch")  # fmt: skip

DESIGNS: dict[str, dict[str, Design]] = {
    "train-mem": {
        # The simulated device memory (allocator replay with cuDNN workspaces) plus the
        # per-GPU constant; the forest corrects what is left in MiB from the anchor, the
        # batch, the share the worst plausible workspace would be of it (cuDNN's choice
        # differs per GPU architecture: the forest learns where it bites) and the GPU.
        # Chosen by leave-one-model-out error (lowest average with max <= 18.5 % and no
        # job under-allocated) among about sixty variants of forest inputs, leaf size and
        # features per split (issue #15).
        "ours": Design("ours", ("sim_device_mb", "gpu_code", "batch", "sim_workspace_share",
                                *GPU_COLS), _absolute_residual(1)),
        # The same without the workspace share (the first design on the new anchor).
        "device-residual": Design("device-residual", ("sim_device_mb", "gpu_code", "batch",
                                                      *GPU_COLS), _absolute_residual(2)),
        # The same anchor and constants, nothing learned beyond them.
        "device-constant": Design("device-constant", ("sim_device_mb", "gpu_code"),
                                  _anchor_only),
        # The previous design: MemTracker's peak as the anchor (no allocator, no workspace).
        "memtracker-residual": Design("memtracker-residual", (
            "sim_peak_mb", "gpu_code", "params_mb", "activations_mb", "batch", *GPU_COLS),
            _absolute_residual(1)),
        "relative-residual": Design("relative-residual", ("sim_peak_mb", "gpu_code", *SIM_COLS,
                                                          *GPU_COLS), ResidualPeakRegressor),
        "paper-rfr": Design("paper-rfr", ("activations_mb", "params_mb", "input_mb",
                                          *PAPER_MEM_GPU_COLS), _paper_rfr, PAPER_PAD),
        "torchinfo": Design("torchinfo", ("torchinfo_total_mb",), ColumnRegressor, 0.0),
    },
    "infer-mem": {
        # The inference passes' device memory plus the per-GPU constant, corrected in MiB
        # (leave one model out on the reconstructed rows: 1.9 % average against 2.2 % for
        # the previous design below).
        "ours": Design("ours", ("sim_device_mb", "gpu_code", "params_mb", "activations_mb",
                                *GPU_COLS), _absolute_residual(2)),
        "memtracker-residual": Design("memtracker-residual", (
            "sim_peak_mb", "gpu_code", "params_mb", "activations_mb", *GPU_COLS),
            ResidualPeakRegressor),
        "paper-rfr": Design("paper-rfr", ("activations_mb", "params_mb", *GPU_COLS),
                            _paper_rfr, PAPER_PAD),
        "torchinfo": Design("torchinfo", ("torchinfo_total_mb",), ColumnRegressor, 0.0),
    },
    "train-time": {
        # Each seen card's own rates for a step's kernels, FLOPs, bytes and samples
        # (`estimator.card_rates`); the log-linear regression below for untraced models.
        "ours": Design("ours", (*card_rates.COLUMNS, *TIME_COLUMNS), CardRatesRegressor, 0.0),
        # log(time) linear in log(features): extrapolates to unseen models (the design
        # served until 2026-12-07).
        "log-linear": Design("log-linear", TIME_COLUMNS, _log_linear, 0.0),
        "log-forest": Design("log-forest", TIME_COLUMNS, _log_forest, 0.0),
        "paper-rfr": Design("paper-rfr", ("activations_mb", "params_mb", "input_mb", *GPU_COLS),
                            _paper_rfr, 0.0),
        # Each class of operation bounded by the GPU's peak rates (`estimator.roofline`).
        "roofline": Design("roofline", roofline.COLUMNS, RooflineRegressor, 0.0),
    },
    "infer-time": {
        "ours": Design("ours", ("sim_gflops", "params_mb", "activations_mb", *GPU_COLS),
                       _log_forest, 0.0),
        "log-linear": Design("log-linear", ("sim_gflops", "params_mb", "activations_mb",
                                            *GPU_COLS), _log_linear, 0.0),
        "paper-rfr": Design("paper-rfr", ("activations_mb", "params_mb", *GPU_COLS),
                            _paper_rfr, 0.0),
        # The same efficiencies, fitted on training steps (the authors' inference times are
        # not physical), priced on the inference pass's operations.
        "roofline": Design("roofline", roofline.COLUMNS, RooflineRegressor, 0.0,
                           fit_target="train-time"),
    },
}
CHOSEN = "ours"
BASELINE = "paper-rfr"
