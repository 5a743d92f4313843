"""Held-out evaluation of the designs in `estimator.fitting.regressors`.

Protocols (outer split -> the pad E is derived by the same scheme inside the
outer training rows, so no held-out row ever informs its own pad):

* ``random``: 80/20 random splits over `RANDOM_SEEDS` seeds; inner 5-fold.
* ``lomo``: leave one model out; inner leave one model out.
* ``lofo``: leave one architecture family out (ResNet, DenseNet, VGG, ... as
  `estimator.zoo` registers them): a held-out model has no sibling in fitting;
  it is padded as the service pads a family absent from training
  (`estimator.padding.padded_unseen_family`: the largest of the inner
  leave-one-model-out pad, the affine pad that covers the inner leave-one-model-out
  and leave-one-family-out predictions, and the workspace margin with its own affine
  pad), so the figures are what a user's new kind of model gets.
* ``logo``: leave one GPU type out; the pad is the service's for a GPU type absent
  from training (``pad_unseen_gpu``: the larger of the inner leave-one-model-out and
  leave-one-GPU-out pads, or the workspace range plus its pad where that is more:
  `estimator.padding.padded_unseen_gpu`).
* ``logo-calibrated``: leave one GPU type out except one calibration job
  (`CALIBRATION_JOB`) profiled on it; inner the same scheme.

Rows marked `over_capacity` (interpolated "does not fit" values) are never
fitted on nor scored as errors; `oom_detected_pct` reports how many of them the
padded estimate correctly flags as not fitting the card. Censored rows (lower
bounds from OOM kills) are fitted as bounds and never scored.

`residual_parts` splits what the previous anchor (MemTracker's peak) left to
learning into what each simulated part explains, per family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import KFold

from estimator.padding import (
    affine_family_padded, fit_censored, held_out_predictions, lower_bounds, pad_fraction,
    padded_unseen_family, padded_unseen_gpu, unseen_family_pads, workspace_range,
)  # fmt: skip
from estimator.fitting import own_fits as own_fits_rule
from estimator.fitting.regressors import Design
from estimator.zoo import REGISTRY

PROTOCOLS = ("random", "lomo", "lofo", "logo", "logo-calibrated")
RANDOM_SEEDS = 10
CALIBRATION_JOB = ("resnet50", 32)


def matrix(frame: pd.DataFrame, design: Design) -> np.ndarray:
    return frame.loc[:, list(design.columns)].to_numpy(dtype=float)


def families(frame: pd.DataFrame) -> np.ndarray:
    """Each row's architecture family: the feature table's (column ``family``), else the
    registry's; a model neither knows is its own family."""
    by_registry = frame["model"].map(lambda m: REGISTRY[m].family if m in REGISTRY else m)
    if "family" in frame:
        return frame["family"].fillna(by_registry).astype(str).to_numpy()
    return by_registry.astype(str).to_numpy()


def _censored(frame: pd.DataFrame) -> np.ndarray:
    if "censored" not in frame:
        return np.zeros(len(frame), dtype=bool)
    return frame["censored"].fillna(False).astype(bool).to_numpy()


def _outer_splits(frame: pd.DataFrame, protocol: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    idx = np.arange(len(frame))
    if protocol == "random":
        for seed in range(RANDOM_SEEDS):
            rng = np.random.default_rng(seed)
            test = rng.random(len(frame)) < 0.2
            yield idx[~test], idx[test]
    elif protocol in ("lomo", "lofo"):
        groups = frame["model"].to_numpy() if protocol == "lomo" else families(frame)
        for group in pd.unique(groups):
            test = groups == group
            yield idx[~test], idx[test]
    elif protocol in ("logo", "logo-calibrated"):
        for gpu in frame["gpu"].unique():
            test = (frame["gpu"] == gpu).to_numpy()
            if protocol == "logo-calibrated":
                calib = test & _is_calibration(frame)
                yield idx[~test | calib], idx[test & ~calib]
            else:
                yield idx[~test], idx[test]
    else:
        raise ValueError(f"unknown protocol {protocol!r}; accepted: {', '.join(PROTOCOLS)}")


def _is_calibration(frame: pd.DataFrame) -> np.ndarray:
    model, batch = CALIBRATION_JOB
    return ((frame["model"] == model) & (frame["batch"] == batch)).to_numpy()


def _inner_pad(design: Design, frame: pd.DataFrame, protocol: str) -> float:
    """E for a regressor fitted on `frame`, by the protocol's scheme inside it."""
    if not isinstance(design.pad, str):
        return float(design.pad)
    fit = frame[~frame["over_capacity"]].reset_index(drop=True)
    X, y, censored = matrix(fit, design), fit["y"].to_numpy(float), _censored(fit)
    if protocol == "logo":  # the service's rule for a GPU type absent
        return max(_inner_pad(design, frame, "lomo"),
                   pad_fraction(lower_bounds(y, censored), held_out_predictions(
                       design.make, X, y, fit["gpu"].to_numpy(), censored)))
    if protocol == "random":
        folds = KFold(5, shuffle=True, random_state=0).split(X)
        groups = np.empty(len(y))
        for k, (_, test) in enumerate(folds):
            groups[test] = k
    elif protocol == "lomo":
        groups = fit["model"].to_numpy()
    else:
        # Calibrated: each GPU held out but for its calibration job, which stays in fitting.
        preds = np.full(len(y), np.nan)
        calib = _is_calibration(fit)
        for gpu in fit["gpu"].unique():
            test = (fit["gpu"] == gpu).to_numpy() & ~calib
            if not test.any():
                continue
            model = fit_censored(design.make, X[~test], y[~test], censored[~test])
            preds[test] = model.predict(X[test])
        scored = ~np.isnan(preds)
        return pad_fraction(lower_bounds(y, censored)[scored], preds[scored])
    return pad_fraction(lower_bounds(y, censored),
                        held_out_predictions(design.make, X, y, groups, censored))


def _unseen_family_pads(design: Design, frame: pd.DataFrame) -> dict[str, float]:
    """The pads the service gives a family absent from `frame` on a GPU type present in it,
    as `training.fit` derives them (artefact keys: ``pad_seen`` and
    `estimator.padding.unseen_family_pads`)."""
    if not isinstance(design.pad, str):
        return {"pad_seen": float(design.pad), "pad_unseen_family": float(design.pad)}
    fit = frame[~frame["over_capacity"]].reset_index(drop=True)
    X, y, censored = matrix(fit, design), fit["y"].to_numpy(float), _censored(fit)
    by_model, by_family = (held_out_predictions(design.make, X, y, groups, censored)
                           for groups in (fit["model"].to_numpy(), families(fit)))
    workspace = workspace_range(fit["sim_workspace_mb"], fit["sim_workspace_max_mb"]) \
        if design.workspace_margin else None
    bounds = lower_bounds(y, censored)
    return {"pad_seen": pad_fraction(bounds, by_model),
            **unseen_family_pads(bounds, by_model, by_family, workspace)}


def _held_apart(fit_frame: pd.DataFrame, test: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """The rows of another target's `fit_frame` that a fold holding out `test` may fit on:
    none of the held-out models (lomo), families (lofo) or GPU types (logo; but the
    calibration job's, logo-calibrated), nor, for random splits, of the held-out (model,
    batch, GPU) points."""
    if protocol == "lomo":
        keep = ~fit_frame["model"].isin(set(test["model"]))
    elif protocol == "lofo":
        keep = ~pd.Series(families(fit_frame), index=fit_frame.index).isin(set(families(test)))
    elif protocol in ("logo", "logo-calibrated"):
        keep = ~fit_frame["gpu"].isin(set(test["gpu"]))
        if protocol == "logo-calibrated":
            keep |= _is_calibration(fit_frame)
    else:
        points = set(zip(test["model"], test["batch"], test["gpu"], strict=True))
        keep = pd.Series([p not in points for p in zip(fit_frame["model"], fit_frame["batch"],
                                                       fit_frame["gpu"], strict=True)],
                         index=fit_frame.index)
    return fit_frame[keep.to_numpy()]


def _run_fold(design: Design, frame: pd.DataFrame, protocol: str, fit_idx: np.ndarray,
              test_idx: np.ndarray, fit_frame: pd.DataFrame | None = None,
              shared_rows: pd.DataFrame | None = None,
              ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """The test rows' predictions, the pad and the padded estimates, as the service pads
    (a held-out family as an unseen one: `estimator.padding.padded_unseen_family`). With
    `fit_frame` (the design's `fit_target` rows), the fold fits on those of its rows that
    `_held_apart` leaves it. `shared_rows`: `frame` is a card's own fit and these are the
    shared fit's rows, whose unseen-family pad (without the held-out families) floors a held-out
    family's (`estimator.predict`)."""
    train = frame.iloc[fit_idx] if fit_frame is None else \
        _held_apart(fit_frame, frame.iloc[test_idx], protocol)
    usable = train[~train["over_capacity"]]
    model = fit_censored(design.make, matrix(usable, design), usable["y"].to_numpy(float),
                         _censored(usable))
    test = frame.iloc[test_idx]
    predicted = model.predict(matrix(test, design))
    if protocol == "lofo":
        pads = _unseen_family_pads(design, train)
        pad = pads["pad_seen"]
        padded = padded_unseen_family(
            predicted, workspace_range(test["sim_workspace_mb"], test["sim_workspace_max_mb"]),
            pad, pads)
        if shared_rows is not None:
            apart = _held_apart(shared_rows, test, protocol)
            padded = np.maximum(padded, affine_family_padded(
                predicted, _unseen_family_pads(design, apart)))
    elif protocol == "logo" and design.workspace_margin:  # the service's unseen-GPU rule
        pad = _inner_pad(design, train, protocol)
        padded = padded_unseen_gpu(
            predicted, workspace_range(test["sim_workspace_mb"], test["sim_workspace_max_mb"]),
            pad, _unseen_family_pads(design, train))
    else:
        pad = _inner_pad(design, train, protocol)
        padded = predicted * (1.0 + pad)
    return test_idx, predicted, pad, padded


def held_out(design: Design, frame: pd.DataFrame, protocol: str, n_jobs: int = 2,
             gpu: str | None = None, fit_frame: pd.DataFrame | None = None,
             own_fits: bool = False, shared_rows: pd.DataFrame | None = None,
             ) -> pd.DataFrame:
    """One row per (outer fold, test row): actual, predicted, padded; with `gpu`, only
    the test rows on that GPU type (the folds fit as they would for every row). A design
    with a `fit_target` fits on `fit_frame`, that target's rows. `own_fits`: the cards
    `estimator.fitting.own_fits` fits on their own rows are judged so, as `schedtune
    train` fits them (protocols that hold out models or families); `shared_rows`: set for
    those cards' parts (`_run_fold`)."""
    if own_fits and protocol in own_fits_rule.PROTOCOLS:
        shared, cards = own_fits_rule.split(frame)
        if cards:
            return pd.concat([held_out(design, part, protocol, n_jobs, gpu, fit_frame,
                                       shared_rows=None if part is shared else shared)
                              for part in (shared, *cards.values())
                              if gpu is None or (part["gpu"] == gpu).any()],
                             ignore_index=True)
    if design.fit_target is not None and fit_frame is None:
        raise ValueError(f"design {design.name!r} fits on {design.fit_target} rows: pass them")
    on_gpu = np.ones(len(frame), bool) if gpu is None else (frame["gpu"] == gpu).to_numpy()
    if not on_gpu.any():
        raise ValueError(f"no rows on GPU {gpu!r}; the data has "
                         f"{', '.join(sorted(frame['gpu'].unique()))}")
    folds = Parallel(n_jobs=n_jobs)(
        delayed(_run_fold)(design, frame, protocol, fit_idx, test_idx[on_gpu[test_idx]],
                           fit_frame if design.fit_target else None, shared_rows)
        for fit_idx, test_idx in _outer_splits(frame, protocol) if on_gpu[test_idx].any()
    )
    parts = [
        frame.iloc[test_idx][["model", "batch", "gpu", "y", "capacity_mib", "over_capacity",
                              *(["censored"] if "censored" in frame else [])]]
        .assign(family=families(frame.iloc[test_idx]), predicted=pred, pad=pad, padded=padded)
        for test_idx, pred, pad, padded in folds
    ]  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def metrics(rows: pd.DataFrame) -> dict[str, float]:
    """RMSE, RMSLE, average / max % error, under- and over-allocation after padding, and
    predicted over actual: median, 10th and 90th percentiles."""
    scored = rows[~rows["over_capacity"] & ~_censored(rows)]
    y, pred, pad = (scored[c].to_numpy(float) for c in ("y", "predicted", "padded"))
    err = np.abs(pred - y) / y
    under = pad < y
    over = (pad[~under] - y[~under]) / y[~under]
    out = {
        "rmse": float(np.sqrt(np.mean((pred - y) ** 2))),
        "rmsle": float(np.sqrt(np.mean((np.log1p(np.maximum(pred, 0)) - np.log1p(y)) ** 2))),
        "avg_err_pct": float(100 * err.mean()),
        "max_err_pct": float(100 * err.max()),
        "under_alloc_pct": float(100 * under.mean()),
        "over_alloc_pct": float(100 * over.mean()) if over.size else 0.0,
        "ratio_median": float(np.median(pred / y)),
        "ratio_p10": float(np.quantile(pred / y, 0.1)),
        "ratio_p90": float(np.quantile(pred / y, 0.9)),
        "rows": int(len(scored)),
    }
    ooms = rows[rows["over_capacity"] & ~_censored(rows)]
    if len(ooms):
        out["oom_detected_pct"] = float(100 * (ooms["padded"] > ooms["capacity_mib"]).mean())
    return out


def evaluate(designs: dict[str, Design], frame: pd.DataFrame, protocol: str,
             n_jobs: int = 2, fit_frame: pd.DataFrame | None = None,
             own_fits: bool = False) -> dict[str, dict[str, float]]:
    """Metrics per design name, all on the same splits of the same rows (`fit_frame`: the
    rows designs with a `fit_target` fit on; `own_fits`: as `held_out`)."""
    return {name: metrics(held_out(d, frame, protocol, n_jobs, fit_frame=fit_frame,
                                   own_fits=own_fits))
            for name, d in designs.items()}


def evaluate_by_family(designs: dict[str, Design], frame: pd.DataFrame, protocol: str,
                       n_jobs: int = 2, gpu: str | None = None,
                       progress: Callable[[str], None] | None = None,
                       fit_frames: dict[str, pd.DataFrame] | None = None,
                       own_fits: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """Metrics per design name, over all held-out rows (``"all"``) and per family; with
    `gpu`, over the held-out rows on that GPU type only. `progress` hears of each design
    as it starts. `fit_frames`: rows per target for designs fitted on another target's."""
    out = {}
    for number, (name, design) in enumerate(designs.items(), 1):
        if progress:
            progress(f"design {number}/{len(designs)}: {name}")
        rows = held_out(design, frame, protocol, n_jobs, gpu,
                        (fit_frames or {}).get(design.fit_target or ""), own_fits)
        out[name] = {"all": metrics(rows), **{
            family: metrics(part) for family, part in rows.groupby("family", sort=True)
            if (~part["over_capacity"]).any()}}
    return out


#: The simulated parts, in the order they are added to the anchor (column, label).
ANCHORS = (
    ("sim_peak_mb", "MemTracker peak (previous anchor)"),
    ("sim_allocated_mb", "+ the measured loop's tensors, 512 B blocks"),
    ("sim_reserved_mb", "+ caching allocator segments"),
    ("sim_device_mb", "+ cuDNN workspaces"),
)


def residual_parts(frame: pd.DataFrame) -> dict[str, dict[str, object]]:
    """How much of the residual each simulated part removes, per family.

    For each anchor of `ANCHORS` (each adds one part to the one before), the
    residual is y - anchor - c[gpu], where the per-GPU constant c (the CUDA context
    and libraries) is the median of y - anchor over the *other* families' rows of
    that GPU, as a model of an unseen family would get it. Reported per family:
    mean |residual| in MiB and in % of y after each anchor, the share of the first
    anchor's mean |residual| each part removed, and the constants (fitted on all
    families) of the last anchor.
    """
    rows = frame[~frame["over_capacity"] & ~_censored(frame)].reset_index(drop=True)
    fam = families(rows)
    y = rows["y"].to_numpy(float)
    left: dict[str, np.ndarray] = {}
    for column, _ in ANCHORS:
        gap = y - rows[column].to_numpy(float)
        const = np.empty(len(rows))
        for family in np.unique(fam):
            others = pd.Series(gap[fam != family]).groupby(rows["gpu"][fam != family].to_numpy())
            const[fam == family] = rows["gpu"][fam == family].map(others.median()).to_numpy()
        left[column] = gap - const
    out: dict[str, dict[str, object]] = {}
    for family in [*np.unique(fam), "all"]:
        mask = np.ones(len(rows), bool) if family == "all" else fam == family
        mae = {c: float(np.nanmean(np.abs(left[c][mask]))) for c, _ in ANCHORS}
        first = mae[ANCHORS[0][0]]
        steps = [c for c, _ in ANCHORS]
        out[str(family)] = {
            "rows": int(mask.sum()),
            "mean_abs_left_mib": mae,
            "mean_abs_left_pct": {c: float(100 * np.nanmean(np.abs(left[c][mask]) / y[mask]))
                                  for c in steps},
            "removed_share_pct": {c: float(100 * (mae[p] - mae[c]) / first) if first else 0.0
                                  for p, c in zip(steps, steps[1:])},
        }
    last = ANCHORS[-1][0]
    out["all"]["gpu_constant_mib"] = {
        str(g): float(np.median(part)) for g, part in
        pd.Series(y - rows[last].to_numpy(float)).groupby(rows["gpu"].to_numpy())}
    return out


def score_service(estimator, measured: pd.DataFrame) -> dict[str, dict[str, float]]:
    """The committed artefacts, padded as the service pads, against profiled rows (model,
    task, batch, gpu, peak_mib, seconds): per task, memory error and under-allocation, and
    time as predicted over measured. Nothing is fitted: every row is held out unless the
    artefacts were trained on it."""
    from estimator.predict import Job  # noqa: PLC0415

    out = {}
    for task, rows in measured.groupby("task", sort=True):
        est = [estimator.estimate(Job(r.model, task, int(r.batch)), gpus=[r.gpu])[r.gpu]
               for r in rows.itertuples()]
        scored = pd.DataFrame({
            "y": rows["peak_mib"].to_numpy(float), "over_capacity": False,
            "predicted": [e.predicted_mib for e in est], "padded": [e.padded_mib for e in est]})
        memory = metrics(scored)
        # seconds per epoch (train) or per request (inference) on both sides
        time_ratio = np.array([e.predicted_s for e in est]) / rows["seconds"].to_numpy(float)
        under = scored["padded"] < scored["y"]
        out[str(task)] = {
            "rows": int(len(rows)),
            "mem_avg_err_pct": memory["avg_err_pct"], "mem_max_err_pct": memory["max_err_pct"],
            "under_alloc": int(under.sum()),
            "worst_under_pct": float(100 * ((scored["y"] - scored["padded"]) / scored["y"])
                                     [under].max()) if under.any() else 0.0,
            "over_alloc_pct": memory["over_alloc_pct"],
            "time_ratio_median": float(np.median(time_ratio)),
            "time_ratio_p10": float(np.quantile(time_ratio, 0.1)),
            "time_ratio_p90": float(np.quantile(time_ratio, 0.9)),
            "families_unseen": int(sum(not e.family_seen for e in est)),
            "gpu_seen": bool(all(e.seen_in_training for e in est)),
        }
    return out
