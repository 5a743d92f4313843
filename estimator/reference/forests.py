"""The SchedTune authors' random forests (joblib files of scikit-learn 1.0.1), read and
evaluated without scikit-learn: their pickles load in no current scikit-learn (its tree
nodes gained a field), and a pickle runs whatever it names.

`load_forest` admits only the classes a forest is made of, each read as plain state (the
forest's trees, each tree's node arrays); `Forest.predict` walks every tree and averages,
as scikit-learn's regressor does. `schedtune data fetch` uses it to rebuild the
`reconstructed_*.csv` tables from the forests (the time and inference-memory data the
authors published only as those forests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from joblib.numpy_pickle import NumpyUnpickler

from estimator.errors import EstimatorError

FOREST = ("sklearn.ensemble._forest", "RandomForestRegressor")
TREE_CLASSES = {("sklearn.tree._classes", "DecisionTreeRegressor"), ("sklearn.tree._tree", "Tree")}
ARRAY_GLOBALS = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("joblib.numpy_pickle", "NumpyArrayWrapper"), ("_codecs", "encode"),
}


class PlainState:
    """Stands in for a scikit-learn class: keeps what the pickle gives it."""

    def __init__(self, *args: Any) -> None:
        self.args, self.state = args, {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.state = state


class _ForestUnpickler(NumpyUnpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == FOREST or (module, name) in TREE_CLASSES:
            return PlainState
        if (module, name) in ARRAY_GLOBALS:
            return super().find_class(module, name)
        raise EstimatorError(f"{self.filename}: a forest file does not name {module}.{name}; "
                             "refused")


@dataclass(frozen=True)
class Tree:
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray  # one per node

    def predict(self, rows: np.ndarray) -> np.ndarray:
        node = np.zeros(len(rows), dtype=np.int64)
        while True:
            inner = self.left[node] != -1
            if not inner.any():
                return self.value[node]
            at = node[inner]
            goes_left = rows[inner, self.feature[at]] <= self.threshold[at]
            node[inner] = np.where(goes_left, self.left[at], self.right[at])


@dataclass(frozen=True)
class Forest:
    features: tuple[str, ...]
    trees: tuple[Tree, ...]

    def predict(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != len(self.features):
            raise EstimatorError(f"a forest of {len(self.features)} features "
                                 f"({', '.join(self.features)}) given rows of shape {rows.shape}")
        # scikit-learn compares in float32, as the trees were fitted
        rows = rows.astype(np.float32).astype(np.float64)
        return np.mean([tree.predict(rows) for tree in self.trees], axis=0)


def load_forest(path: Path) -> Forest:
    """A RandomForestRegressor's joblib file (uncompressed), as a `Forest`."""
    with open(path, "rb") as handle:
        try:
            forest = _ForestUnpickler(str(path), handle, ensure_native_byte_order=True).load()
        except EstimatorError:
            raise
        except Exception as exc:  # noqa: BLE001  (any malformed pickle: one clear error)
            raise EstimatorError(f"{path}: not a readable forest file ({exc})") from exc
    if not isinstance(forest, PlainState) or "estimators_" not in forest.state:
        raise EstimatorError(f"{path}: not a fitted RandomForestRegressor")
    names = forest.state.get("feature_names_in_")
    count = int(forest.state.get("n_features_in_", 0))
    features = tuple(str(n) for n in names) if names is not None else \
        tuple(f"x{i}" for i in range(count))
    return Forest(features, tuple(_tree(estimator) for estimator in forest.state["estimators_"]))


def _tree(estimator: Any) -> Tree:
    tree = estimator.state.get("tree_") if isinstance(estimator, PlainState) else None
    if not isinstance(tree, PlainState) or "nodes" not in tree.state:
        raise EstimatorError("a forest's estimator is not a fitted regression tree")
    nodes, values = tree.state["nodes"], np.asarray(tree.state["values"], dtype=np.float64)
    return Tree(np.asarray(nodes["left_child"]), np.asarray(nodes["right_child"]),
                np.asarray(nodes["feature"]), np.asarray(nodes["threshold"]),
                values.reshape(len(values), -1)[:, 0])
