"""What the time rows themselves allow (2026-12-06, late; issue #47's time bars).

    SCHEDTUNE_DATA=../shared/data python docs/2026-12-06-time-floors.py

In-sample fits, so each figure is a floor no held-out predictor of that form goes below:

1. The authors' training times (240 rows: 12 models x 5 GPUs x 4 batches; the authors'
   forests' outputs): a curve per (model, GPU) pair says how smooth each pair is; a model
   term plus a GPU term (each with its own batch slope) is the best any predictor whose
   model part and GPU part multiply can do, even knowing every model's own constant.
2. The H200's measured inference passes (108 rows): per model, a time per pass plus a time
   per sample (both >= 0) is the best any predictor can do whose time grows with the batch.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import nnls

DATA = Path(os.environ.get("SCHEDTUNE_DATA", "../shared/data")) / "schedtune-ccgrid22"
H200 = Path(__file__).resolve().parents[1] / "profiles" / "measured" / "H200.csv"


def errors(predicted: np.ndarray, actual: np.ndarray) -> str:
    e = np.abs(predicted / actual - 1.0) * 100
    return f"average {e.mean():.1f} %, worst {e.max():.1f} %"


def authors() -> None:
    t = pd.read_csv(DATA / "reconstructed_train_time.csv")
    y, lb = np.log(t["train_time_s_reconstructed"].to_numpy()), np.log(t["batchsize"].to_numpy())
    pair = pd.get_dummies(t["model"] + "|" + t["gpu"]).astype(float)
    per_pair = pd.concat([pair, pair.mul(lb, axis=0), pair.mul(lb**2, axis=0)], axis=1)
    model, gpu = (pd.get_dummies(t[c]).astype(float) for c in ("model", "gpu"))
    separable = pd.concat([model, gpu, model.mul(lb, axis=0), gpu.mul(lb, axis=0),
                           model.mul(lb**2, axis=0)], axis=1)
    for name, X in (("a curve per (model, GPU)", per_pair), ("model term x GPU term", separable)):
        coef, *_ = np.linalg.lstsq(X.to_numpy(), y, rcond=None)
        print(f"authors' training rows, {name}: {errors(np.exp(X.to_numpy() @ coef), np.exp(y))}")


def h200_inference() -> None:
    rows = pd.read_csv(H200)
    rows = rows[rows["task"] == "inference"]
    predicted, actual, falling = [], [], 0
    for _, g in rows.groupby("model"):
        g = g.sort_values("batch")
        b, s = g["batch"].to_numpy(float), g["seconds"].to_numpy()
        falling += bool((np.diff(s) < 0).any())
        A = np.c_[np.ones_like(b), b]
        coef, _ = nnls(A, s)
        predicted.extend(A @ coef)
        actual.extend(s)
    print(f"H200 inference rows, per model a pass + a sample: "
          f"{errors(np.array(predicted), np.array(actual))}; "
          f"{falling} of {rows['model'].nunique()} models take less time at a larger batch")


if __name__ == "__main__":
    authors()
    h200_inference()
