"""Fit one target's design on all usable rows, with its held-out pads and metadata."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from estimator import card_rates
from estimator.fitting import artefacts
from estimator.reference.tables import RECONSTRUCTED, TARGETS
from estimator.fitting.evaluation import evaluate, families, matrix
from estimator.padding import (
    fit_censored, held_out_predictions, lower_bounds, pad_fraction, unseen_family_pads,
    workspace_range,
)  # fmt: skip
from estimator.fitting.regressors import DESIGNS


def artefact_name(target: str, design: str) -> str:
    return f"{target}.{design}"


def censored_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows whose ``y`` is a lower bound (a job killed for memory with ``y`` MiB held)."""
    if "censored" not in frame:
        return np.zeros(len(frame), dtype=bool)
    return frame["censored"].fillna(False).astype(bool).to_numpy()


def fit(target: str, design_name: str, frame: pd.DataFrame,
        with_stats: bool = True, fit_frame: pd.DataFrame | None = None,
        protocols: tuple[str, ...] = ("lomo", "lofo", "logo")) -> tuple[Any, dict[str, Any]]:
    """The fitted regressor and its metadata.

    ``pad_seen``: E for a GPU type present in the rows (from leave one model
    out: covers models never seen); ``pad_unseen_gpu``: E for a GPU type absent
    from the rows (the larger of that and leave one GPU out);
    ``pad_unseen_family`` (+ ``pad_unseen_family_mib``): the affine pad for a model whose
    architecture family is absent from the rows (``seen_families``), from leave one model
    out and leave one family out together (`estimator.padding.unseen_family_pads`; with a
    single family in the rows it cannot be calibrated and is the larger of the other two,
    ``pad_unseen_family_basis`` says which); ``pad_unseen_family_workspace`` (+ ``_mib``):
    the same schemes' pad of what the job's workspace range leaves
    (`estimator.padding.padded_unseen_family`; designs with the workspace margin and rows
    of two families or more only). Rows with ``censored`` set are lower bounds (OOM kills,
    `estimator.fitting.observations`): fitted Tobit-style and covered by every pad. A design
    with a `fit_target` is fitted on `fit_frame`, that target's rows (its statistics are
    still scored on `frame`'s). `protocols`: the held-out statistics kept (a card fitted on
    its own rows has no other GPU type to hold out).
    """
    design = DESIGNS[target][design_name]
    if design.fit_target is not None and fit_frame is None:
        raise ValueError(f"design {design_name!r} fits on {design.fit_target} rows: pass them")
    rows = frame if design.fit_target is None else fit_frame
    usable = rows[~rows["over_capacity"]].reset_index(drop=True)
    X, y = matrix(usable, design), usable["y"].to_numpy(float)
    censored = censored_mask(usable)
    regressor = fit_censored(design.make, X, y, censored)
    row_families = families(usable)
    seen_families = sorted({str(f) for f in row_families})
    family_pads: dict[str, float]
    if isinstance(design.pad, str):
        bounds = lower_bounds(y, censored)

        def held_out(groups: np.ndarray) -> np.ndarray:
            return held_out_predictions(design.make, X, y, groups, censored)

        by_model = held_out(usable["model"].to_numpy())
        pad_seen = pad_fraction(bounds, by_model)
        pad_unseen = max(pad_seen, pad_fraction(bounds, held_out(usable["gpu"].to_numpy()))) \
            if usable["gpu"].nunique() > 1 else pad_seen  # one card: no other to hold out
        if len(seen_families) >= 2:
            workspace = workspace_range(usable["sim_workspace_mb"],
                                        usable["sim_workspace_max_mb"]) \
                if design.workspace_margin else None
            family_pads = unseen_family_pads(bounds, by_model, held_out(row_families),
                                             workspace)
            basis = "leave one family out"
        else:
            family_pads = {"pad_unseen_family": max(pad_seen, pad_unseen)}
            basis = "one family only: not calibrated"
    else:
        pad_seen = pad_unseen = float(design.pad)
        family_pads, basis = {"pad_unseen_family": pad_seen}, "fixed"
    meta: dict[str, Any] = {
        "target": target,
        "unit": TARGETS[target][1],
        "design": design_name,
        "columns": list(design.columns),
        "pad_seen": pad_seen,
        "pad_unseen_gpu": pad_unseen,
        **family_pads,
        "pad_unseen_family_basis": basis,
        "seen_gpus": sorted(usable["gpu"].unique()),
        "seen_families": seen_families,
        "models": sorted(usable["model"].unique()),
        "rows": int(len(usable)),
        "censored_rows": int(censored.sum()),
        "sources": usable["source"].value_counts().to_dict(),
        "reconstructed_data": target in RECONSTRUCTED,
        "data_sha256": artefacts.data_hash(usable[["model", "batch", "gpu", "y"]]),
    }
    if target.endswith("-time"):
        # The cards with rows enough of their own to be priced by this artefact; the
        # service prices the others from the roofline (one calibration job is too few).
        # Enough: `card_rates.MIN_ROWS`, or as many as the best-covered card has (the
        # authors' inference rows are one batch per model: 7 a card with a family held out).
        counts = usable["gpu"].value_counts()
        enough = min(card_rates.MIN_ROWS, int(counts.max()))
        meta["priced_gpus"] = sorted(str(g) for g, n in counts.items() if n >= enough)
    if with_stats:
        meta["held_out"] = {
            protocol: evaluate({design_name: design}, frame, protocol,
                               fit_frame=fit_frame)[design_name]
            for protocol in protocols
        }
    return regressor, meta
