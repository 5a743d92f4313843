"""Fit one target's design on all usable rows, with its held-out pads and metadata."""

from __future__ import annotations

from typing import Any

import pandas as pd

from estimator import artefacts
from estimator.data import RECONSTRUCTED, TARGETS
from estimator.evaluation import evaluate, matrix
from estimator.padding import held_out_pad
from estimator.regressors import DESIGNS


def artefact_name(target: str, design: str) -> str:
    return f"{target}.{design}"


def fit(target: str, design_name: str, frame: pd.DataFrame,
        with_stats: bool = True) -> tuple[Any, dict[str, Any]]:
    """The fitted regressor and its metadata.

    ``pad_seen``: E for a GPU type present in the rows (from leave one model
    out: covers models never seen); ``pad_unseen_gpu``: E for a GPU type absent
    from the rows (the larger of that and leave one GPU out).
    """
    design = DESIGNS[target][design_name]
    usable = frame[~frame["over_capacity"]].reset_index(drop=True)
    X, y = matrix(usable, design), usable["y"].to_numpy(float)
    regressor = design.make().fit(X, y)
    if isinstance(design.pad, str):
        pad_seen = held_out_pad(design.make, X, y, usable["model"].to_numpy())
        pad_unseen = max(pad_seen, held_out_pad(design.make, X, y, usable["gpu"].to_numpy()))
    else:
        pad_seen = pad_unseen = float(design.pad)
    meta: dict[str, Any] = {
        "target": target,
        "unit": TARGETS[target][1],
        "design": design_name,
        "columns": list(design.columns),
        "pad_seen": pad_seen,
        "pad_unseen_gpu": pad_unseen,
        "seen_gpus": sorted(usable["gpu"].unique()),
        "models": sorted(usable["model"].unique()),
        "rows": int(len(usable)),
        "sources": usable["source"].value_counts().to_dict(),
        "reconstructed_data": target in RECONSTRUCTED,
        "data_sha256": artefacts.data_hash(usable[["model", "batch", "gpu", "y"]]),
    }
    if with_stats:
        meta["held_out"] = {
            protocol: evaluate({design_name: design}, frame, protocol)[design_name]
            for protocol in ("lomo", "logo")
        }
    return regressor, meta

