"""Trained regressors in plain numpy: the form the service loads (``<name>.npz``).

Training fits scikit-learn objects and pickles them (``<name>.joblib``, for evaluation);
`estimator.fitting.compiling` turns each into the arrays below. Loading them needs numpy only:
no scikit-learn, SciPy or pandas import (about a second of a replica's start) and no
unpickling, and predictions equal scikit-learn's to the last bit (same float32 tree
comparisons, same order of sums; tests/estimator/test_portable.py checks every artefact).

The kinds, nested as the designs nest them:

* `Forest`: a random forest's trees as one node table (a leaf points at itself, so every
  row walks the same number of steps);
* `Linear`: optional log1p, standardisation, then a dot product (the Ridge pipeline);
* `LogTarget`: exp of the inner prediction (a regressor fitted on log of the target);
* `Residual`: `ResidualPeakRegressor`'s per-GPU anchor corrected by its forest (or by
  nothing, when it was fitted without one);
* `Column`: one input column as it is (torchinfo's estimate);
* `Roofline`: `estimator.roofline`'s learned efficiencies;
* `CardRates`: `estimator.card_rates`' rates per card, and the regressor for the rest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from estimator import card_rates, roofline
from estimator.errors import ArtefactError

MODELS_DIR = Path(__file__).resolve().parent.parent / "profiles" / "models"
Arrays = dict[str, np.ndarray]


class Regressor(Protocol):
    def predict(self, X: np.ndarray) -> np.ndarray: ...
    def to_arrays(self, prefix: str) -> Arrays: ...


@dataclass(frozen=True, eq=False)
class Forest:
    """Mean of the trees' leaf values, summed tree by tree as scikit-learn sums them."""

    left: np.ndarray  # node -> left child (a leaf: itself)
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    roots: np.ndarray  # tree -> its root node
    depth: int

    def predict(self, X: np.ndarray) -> np.ndarray:
        X32 = np.asarray(X, dtype=np.float32)  # trees compare float32 inputs
        rows = np.arange(len(X32))
        nodes = np.repeat(self.roots[:, None], len(X32), axis=1)
        for _ in range(self.depth):
            go_left = X32[rows, self.feature[nodes]] <= self.threshold[nodes]
            nodes = np.where(go_left, self.left[nodes], self.right[nodes])
        leaves = self.value[nodes]
        out = np.zeros(len(X32))
        for tree in leaves:
            out += tree
        out /= len(self.roots)
        return out

    def to_arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}kind": np.array("forest"), f"{prefix}left": self.left,
                f"{prefix}right": self.right, f"{prefix}feature": self.feature,
                f"{prefix}threshold": self.threshold, f"{prefix}value": self.value,
                f"{prefix}roots": self.roots, f"{prefix}depth": np.array(self.depth)}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> Forest:
        return cls(*(arrays[f"{prefix}{k}"] for k in ("left", "right", "feature", "threshold",
                                                      "value", "roots")),
                   depth=int(arrays[f"{prefix}depth"]))


@dataclass(frozen=True, eq=False)
class Linear:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    log1p: bool

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.log1p(X) if self.log1p else np.array(X, dtype=float)
        X -= self.mean
        X /= self.scale
        return X @ self.coef + self.intercept

    def to_arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}kind": np.array("linear"), f"{prefix}mean": self.mean,
                f"{prefix}scale": self.scale, f"{prefix}coef": self.coef,
                f"{prefix}intercept": np.array(self.intercept),
                f"{prefix}log1p": np.array(self.log1p)}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> Linear:
        return cls(arrays[f"{prefix}mean"], arrays[f"{prefix}scale"], arrays[f"{prefix}coef"],
                   float(arrays[f"{prefix}intercept"]), bool(arrays[f"{prefix}log1p"]))


@dataclass(frozen=True, eq=False)
class LogTarget:
    inner: Regressor

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.exp(self.inner.predict(X))

    def to_arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}kind": np.array("log-target"), **self.inner.to_arrays(f"{prefix}inner.")}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> LogTarget:
        return cls(_read(arrays, f"{prefix}inner."))


@dataclass(frozen=True, eq=False)
class Residual:
    """anchor * (1 + forest) (relative) or anchor + forest, anchor = scale[g] * base + offset[g]
    with g the GPU code column; a GPU not seen in fitting takes the unseen constants."""

    base_col: int
    group_col: int | None
    relative: bool
    groups: np.ndarray
    offsets: np.ndarray
    scales: np.ndarray
    unseen_offset: float
    unseen_scale: float
    forest: Forest | None

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        groups = X[:, self.group_col] if self.group_col is not None else np.zeros(len(X))
        known = dict(zip(self.groups.tolist(), zip(self.offsets.tolist(), self.scales.tolist(),
                                                   strict=True), strict=True))
        unseen = (self.unseen_offset, self.unseen_scale)
        pairs = [known.get(g, unseen) for g in groups]
        offsets = np.array([o for o, _ in pairs])
        scales = np.array([s for _, s in pairs])
        anchor = scales * X[:, self.base_col] + offsets
        keep = [i for i in range(X.shape[1]) if i != self.group_col]
        correction = np.zeros(len(X)) if self.forest is None else self.forest.predict(X[:, keep])
        return anchor * (1.0 + correction) if self.relative else anchor + correction

    def to_arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}kind": np.array("residual"),
                f"{prefix}base_col": np.array(self.base_col),
                f"{prefix}group_col": np.array(-1 if self.group_col is None else self.group_col),
                f"{prefix}relative": np.array(self.relative), f"{prefix}groups": self.groups,
                f"{prefix}offsets": self.offsets, f"{prefix}scales": self.scales,
                f"{prefix}unseen": np.array([self.unseen_offset, self.unseen_scale]),
                f"{prefix}has_forest": np.array(self.forest is not None),
                **({} if self.forest is None else self.forest.to_arrays(f"{prefix}forest."))}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> Residual:
        group_col = int(arrays[f"{prefix}group_col"])
        unseen_offset, unseen_scale = (float(v) for v in arrays[f"{prefix}unseen"])
        return cls(int(arrays[f"{prefix}base_col"]), None if group_col < 0 else group_col,
                   bool(arrays[f"{prefix}relative"]), arrays[f"{prefix}groups"],
                   arrays[f"{prefix}offsets"], arrays[f"{prefix}scales"], unseen_offset,
                   unseen_scale, Forest.from_arrays(arrays, f"{prefix}forest.")
                   if bool(arrays.get(f"{prefix}has_forest", True)) else None)


@dataclass(frozen=True, eq=False)
class Column:
    col: int

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=float)[:, self.col].astype(float)

    def to_arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}kind": np.array("column"), f"{prefix}col": np.array(self.col)}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> Column:
        return cls(int(arrays[f"{prefix}col"]))


@dataclass(frozen=True, eq=False)
class Roofline:
    pooled: np.ndarray
    architectures: np.ndarray  # codes seen in fitting
    deviations: np.ndarray  # one (delta z_e, delta z_m) row per code

    def predict(self, X: np.ndarray) -> np.ndarray:
        deviation = dict(zip(self.architectures.tolist(), self.deviations, strict=True))
        return roofline.unit_time(X, self.pooled, deviation)

    def to_arrays(self, prefix: str) -> Arrays:
        return {f"{prefix}kind": np.array("roofline"), f"{prefix}pooled": self.pooled,
                f"{prefix}architectures": self.architectures,
                f"{prefix}deviations": self.deviations}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> Roofline:
        return cls(*(arrays[f"{prefix}{k}"] for k in ("pooled", "architectures", "deviations")))


@dataclass(frozen=True, eq=False)
class CardRates:
    """`estimator.card_rates`' epoch time on the cards fitted; `fallback` (reading the
    columns after `card_rates.COLUMNS`) for other cards and untraced steps. Artefacts
    saved before the per-class rates load with none (the pooled rates price every step)."""

    cards: np.ndarray
    rates: np.ndarray
    fallback: Regressor
    class_rates: np.ndarray | None = None
    supports: np.ndarray | None = None

    def predict(self, X: np.ndarray) -> np.ndarray:
        return card_rates.priced(np.asarray(X, dtype=float), self.cards, self.rates,
                                 self.fallback.predict, self.class_rates, self.supports)

    def to_arrays(self, prefix: str) -> Arrays:
        per_class = {} if self.class_rates is None else {
            f"{prefix}class_rates": self.class_rates, f"{prefix}supports": self.supports}
        return {f"{prefix}kind": np.array("card-rates"), f"{prefix}cards": self.cards,
                f"{prefix}rates": self.rates, **per_class,
                **self.fallback.to_arrays(f"{prefix}fallback.")}

    @classmethod
    def from_arrays(cls, arrays: Arrays, prefix: str) -> CardRates:
        per_class = [arrays.get(f"{prefix}{k}") for k in ("class_rates", "supports")]
        return cls(arrays[f"{prefix}cards"], arrays[f"{prefix}rates"],
                   _read(arrays, f"{prefix}fallback."), *per_class)


KINDS: dict[str, Any] = {"forest": Forest, "linear": Linear, "log-target": LogTarget,
                         "residual": Residual, "column": Column, "roofline": Roofline,
                         "card-rates": CardRates}


def _read(arrays: Arrays, prefix: str) -> Regressor:
    kind = str(arrays[f"{prefix}kind"])
    if kind not in KINDS:
        raise ArtefactError(f"unknown regressor kind {kind!r}")
    return KINDS[kind].from_arrays(arrays, prefix)


def save(path: Path, regressor: Regressor) -> Path:
    np.savez_compressed(path, **regressor.to_arrays(""))
    return path


def load(name: str, directory: Path) -> tuple[Regressor, dict[str, Any]]:
    """``<name>.npz`` and its ``<name>.json`` metadata; `ArtefactError` if missing or corrupt.

    No pickle is read (``allow_pickle=False``), so any directory is safe to load from."""
    path, meta_path = directory / f"{name}.npz", directory / f"{name}.json"
    if not path.is_file() or not meta_path.is_file():
        raise ArtefactError(f"artefact {name!r} missing in {directory}; run schedtune train")
    try:
        meta = json.loads(meta_path.read_text())
        with np.load(path, allow_pickle=False) as stored:
            regressor = _read(dict(stored), "")
    except (OSError, ValueError, KeyError) as exc:  # JSONDecodeError is a ValueError
        raise ArtefactError(f"corrupt artefact {name!r} in {directory}: {exc}") from exc
    return regressor, meta
