"""Fitted scikit-learn regressors of our designs -> their numpy form (`estimator.portable`).

Only the shapes `estimator.fitting.regressors.DESIGNS` builds are known; anything else is a
`TypeError` at training time rather than a wrong prediction in the service.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from estimator.fitting.regressors import (
    CardRatesRegressor,
    ColumnRegressor,
    ResidualPeakRegressor,
    RooflineRegressor,
)
from estimator.portable import (
    CardRates,
    Column,
    Forest,
    Linear,
    LogTarget,
    Regressor,
    Residual,
    Roofline,
)


def compile_regressor(fitted: Any) -> Regressor:
    if isinstance(fitted, RandomForestRegressor):
        return _forest(fitted)
    if isinstance(fitted, ResidualPeakRegressor):
        return _residual(fitted)
    if isinstance(fitted, TransformedTargetRegressor):
        if fitted.func is not np.log or fitted.inverse_func is not np.exp:
            raise TypeError("only log/exp target transforms compile")
        return LogTarget(compile_regressor(fitted.regressor_))
    if isinstance(fitted, Pipeline):
        return _linear(fitted)
    if isinstance(fitted, ColumnRegressor):
        return Column(fitted.col)
    if isinstance(fitted, RooflineRegressor):
        codes = sorted(fitted.deviation_)
        return Roofline(np.asarray(fitted.pooled_, dtype=float), np.array(codes, dtype=float),
                        np.array([fitted.deviation_[c] for c in codes], dtype=float).reshape(-1, 2))
    if isinstance(fitted, CardRatesRegressor):
        return CardRates(np.asarray(fitted.cards_, dtype=float),
                         np.asarray(fitted.rates_, dtype=float),
                         compile_regressor(fitted.fallback_),
                         np.asarray(fitted.class_rates_, dtype=float),
                         np.asarray(fitted.supports_, dtype=float))
    raise TypeError(f"no numpy form for {type(fitted).__name__}")


def _forest(forest: RandomForestRegressor) -> Forest:
    if forest.n_outputs_ != 1:
        raise TypeError("only single-output forests compile")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("left", "right", "feature",
                                                           "threshold", "value")}
    roots, start = [], 0
    for tree in (e.tree_ for e in forest.estimators_):
        index = np.arange(tree.node_count) + start
        leaf = tree.children_left < 0
        parts["left"].append(np.where(leaf, index, tree.children_left + start))
        parts["right"].append(np.where(leaf, index, tree.children_right + start))
        parts["feature"].append(np.where(leaf, 0, tree.feature))
        parts["threshold"].append(np.where(leaf, 0.0, tree.threshold))
        parts["value"].append(tree.value[:, 0, 0])
        roots.append(start)
        start += tree.node_count
    joined = {k: np.concatenate(v) for k, v in parts.items()}
    return Forest(joined["left"].astype(np.int64), joined["right"].astype(np.int64),
                  joined["feature"].astype(np.int64), joined["threshold"].astype(np.float64),
                  joined["value"].astype(np.float64), np.array(roots, dtype=np.int64),
                  depth=max(e.tree_.max_depth for e in forest.estimators_))


def _residual(fitted: ResidualPeakRegressor) -> Residual:
    groups = np.array(sorted(fitted.offsets_), dtype=float)
    return Residual(
        base_col=fitted.base_col, group_col=fitted.group_col, relative=fitted.relative,
        groups=groups, offsets=np.array([fitted.offsets_[g] for g in groups], dtype=float),
        scales=np.array([fitted.scales_[g] for g in groups], dtype=float),
        unseen_offset=float(fitted.unseen_offset_), unseen_scale=float(fitted.unseen_scale_),
        forest=None if fitted.forest_ is None else _forest(fitted.forest_),
    )  # fmt: skip


def _linear(pipeline: Pipeline) -> Linear:
    steps = [step for _, step in pipeline.steps]
    log1p = bool(steps and isinstance(steps[0], FunctionTransformer))
    if log1p:
        if steps[0].func is not np.log1p:
            raise TypeError("only a log1p function transform compiles")
        steps = steps[1:]
    if len(steps) != 2 or not isinstance(steps[0], StandardScaler) \
            or not isinstance(steps[1], RidgeCV) or np.ndim(steps[1].coef_) != 1:
        raise TypeError("only [log1p] -> StandardScaler -> single-target RidgeCV compiles")
    scaler, ridge = steps
    if not (scaler.with_mean and scaler.with_std):
        raise TypeError("only a centring and scaling StandardScaler compiles")
    return Linear(np.asarray(scaler.mean_, dtype=float), np.asarray(scaler.scale_, dtype=float),
                  np.asarray(ridge.coef_, dtype=float), float(ridge.intercept_), log1p)
