"""Observed runs (the monitor's records of finished jobs) as training rows for the time
targets, and the held-out comparison that says whether refitting with them helps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold

from estimator.catalogue import CATALOGUE
from estimator.data import TARGETS
from estimator.evaluation import matrix
from estimator.feature_table import FeatureTable
from estimator.regressors import DESIGNS

TIME_TARGETS = ("train-time", "infer-time")


def observation_rows(observations: Iterable[Mapping[str, Any]], target: str,
                     table: FeatureTable | None = None) -> pd.DataFrame:
    """Successful runs of known models on catalogue GPUs, in the target's unit
    (seconds per epoch, or ms per request). Anything else is left out."""
    if target not in TIME_TARGETS:
        raise ValueError(f"observations refit the time targets only ({', '.join(TIME_TARGETS)})")
    task = TARGETS[target][0]
    known = set((table or FeatureTable.load()).models)
    rows = []
    for obs in observations:
        try:
            seconds, units, batch = float(obs["seconds"]), int(obs["units"]), int(obs["batch"])
        except (KeyError, TypeError, ValueError):
            continue
        if (obs.get("outcome") != "succeeded" or obs.get("task") != task or seconds <= 0
                or units <= 0 or batch <= 0 or obs.get("model") not in known
                or obs.get("gpu_type") not in CATALOGUE):  # fmt: skip
            continue
        per_unit = seconds / units * (1000.0 if target == "infer-time" else 1.0)
        rows.append({"model": obs["model"], "batch": batch, "gpu": obs["gpu_type"],
                     "y": per_unit, "source": "observed"})
    return pd.DataFrame(rows, columns=["model", "batch", "gpu", "y", "source"])


def supersede(frame: pd.DataFrame) -> pd.DataFrame:
    """Drop reference rows for which this cluster observed the same (model, batch, gpu):
    what was measured here wins over reconstructed figures."""
    observed = frame["source"].eq("observed")
    keys = pd.MultiIndex.from_frame(frame[["model", "batch", "gpu"]])
    seen = set(keys[observed.to_numpy()])
    stale = ~observed & np.fromiter((k in seen for k in keys), bool, len(frame))
    return frame[~stale].reset_index(drop=True)


def refit_gain(target: str, design_name: str, frame: pd.DataFrame, folds: int = 5,
               seed: int = 0) -> dict[str, Any]:
    """Error on the observed rows before (fit on the reference rows only) and after
    (fit on reference + the other folds of observations, which supersede the reference
    rows of the same job), as mean absolute % error."""
    design = DESIGNS[target][design_name]
    usable = frame[~frame["over_capacity"]].reset_index(drop=True)
    observed = usable["source"].eq("observed").to_numpy()
    base, obs = usable[~observed], usable[observed].reset_index(drop=True)
    if len(obs) < folds:
        raise ValueError(f"{len(obs)} usable observations for {target}; need at least {folds}")
    y_obs = obs["y"].to_numpy(float)
    before = design.make().fit(matrix(base, design), base["y"].to_numpy(float))
    before_pred = before.predict(matrix(obs, design))
    after_pred = np.empty(len(obs))
    for train, test in KFold(folds, shuffle=True, random_state=seed).split(obs):
        both = supersede(pd.concat([base, obs.iloc[train]], ignore_index=True))
        model = design.make().fit(matrix(both, design), both["y"].to_numpy(float))
        after_pred[test] = model.predict(matrix(obs.iloc[test], design))
    return {"target": target, "design": design_name, "observations": int(len(obs)),
            "before_mape_pct": round(100 * float(np.mean(np.abs(before_pred - y_obs) / y_obs)), 2),
            "after_mape_pct": round(100 * float(np.mean(np.abs(after_pred - y_obs) / y_obs)), 2)}
