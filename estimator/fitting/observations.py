"""Observed runs (the monitor's records of finished jobs) as training rows, and the
held-out comparisons that say whether refitting with them helps.

* Time targets: successful runs give seconds per epoch (or ms per request).
* Memory targets: a run killed for memory (``oom`` set, or outcome ``oom``) gives a
  censored row: its true peak was above the ``reserved_mib`` it held on that GPU
  type. Fitting treats it as a lower bound and every pad must lift its held-out
  prediction above it (`estimator.padding.fit_censored`, ``CENSOR_MARGIN``).
  Successful runs say nothing exact about memory (the monitor does not measure the
  peak), so they are not used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold

from estimator.catalogue import CATALOGUE
from estimator.reference.tables import TARGETS
from estimator.fitting.evaluation import matrix
from estimator.feature_table import FeatureTable
from estimator.padding import CENSOR_MARGIN, fit_censored, held_out_pad
from estimator.fitting.regressors import DESIGNS

TIME_TARGETS = ("train-time", "infer-time")
MEMORY_TARGETS = ("train-mem", "infer-mem")


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


def _killed(obs: Mapping[str, Any]) -> bool:
    return str(obs.get("oom", "0")).strip() in ("1", "True", "true") or obs.get("outcome") == "oom"


def censored_rows(observations: Iterable[Mapping[str, Any]], target: str,
                  table: FeatureTable | None = None) -> pd.DataFrame:
    """Runs of known models on catalogue GPUs killed for memory, as lower bounds: ``y`` is
    the MiB they held (``reserved_mib``), ``censored`` is True. Anything else is left out."""
    if target not in MEMORY_TARGETS:
        raise ValueError(f"censored rows are memory rows ({', '.join(MEMORY_TARGETS)})")
    task = TARGETS[target][0]
    known = set((table or FeatureTable.load()).models)
    rows = []
    for obs in observations:
        try:
            reserved, batch = float(obs["reserved_mib"]), int(obs["batch"])
        except (KeyError, TypeError, ValueError):
            continue
        if (not _killed(obs) or obs.get("task") != task or not np.isfinite(reserved)
                or reserved <= 0 or batch <= 0 or obs.get("model") not in known
                or obs.get("gpu_type") not in CATALOGUE
                or reserved > CATALOGUE[obs["gpu_type"]].memory_mib):  # fmt: skip
            continue
        rows.append({"model": obs["model"], "batch": batch, "gpu": obs["gpu_type"],
                     "y": reserved, "source": "oom", "censored": True})
    return pd.DataFrame(rows, columns=["model", "batch", "gpu", "y", "source", "censored"])


def censored_gain(target: str, design_name: str, frame: pd.DataFrame, folds: int = 5,
                  seed: int = 0) -> dict[str, Any]:
    """Share of the killed runs whose padded prediction would still be below what killed
    them (x ``CENSOR_MARGIN``): before (fit and leave-one-model-out pad on the other rows
    only) and after (held out: each fold of killed runs predicted by a fit, and a pad,
    that saw the other folds)."""
    design = DESIGNS[target][design_name]
    if not isinstance(design.pad, str):
        raise ValueError(f"{design_name} has a fixed pad; censored rows cannot widen it")
    usable = frame[~frame["over_capacity"]].reset_index(drop=True)
    killed = usable["censored"].fillna(False).astype(bool).to_numpy() if "censored" in usable \
        else np.zeros(len(usable), bool)
    base, obs = usable[~killed].reset_index(drop=True), usable[killed].reset_index(drop=True)
    if len(obs) < 1:
        raise ValueError(f"no usable killed runs for {target}")
    bound = obs["y"].to_numpy(float) * CENSOR_MARGIN

    def padded(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
        X, y = matrix(train, design), train["y"].to_numpy(float)
        mask = train["censored"].fillna(False).astype(bool).to_numpy() if "censored" in train \
            else np.zeros(len(train), bool)
        model = fit_censored(design.make, X, y, mask)
        pad = held_out_pad(design.make, X, y, train["model"].to_numpy(), mask)
        return model.predict(matrix(test, design)) * (1.0 + pad)

    before = padded(base, obs)
    after = np.empty(len(obs))
    splits = (KFold(min(folds, len(obs)), shuffle=True, random_state=seed).split(obs)
              if len(obs) >= 2 else [(np.array([], int), np.arange(len(obs)))])
    for train, test in splits:
        both = pd.concat([base, obs.iloc[train]], ignore_index=True)
        after[test] = padded(both, obs.iloc[test])
    return {"target": target, "design": design_name, "killed_runs": int(len(obs)),
            "still_killed_before_pct": round(100 * float(np.mean(before < bound)), 1),
            "still_killed_after_pct": round(100 * float(np.mean(after < bound)), 1)}
