"""Training data: the authors' reference data (read in place) joined with our features.

The reference data never enters the repository: it is read from a data directory
(default ``../shared/data`` beside the checkout). Our own measurements
(``profiles/measurements.csv``, written by ``schedtune profile``) and
observed runs are added when present.

Each loader returns a DataFrame with one row per (model, task, batch, gpu):
the target, the paper's feature columns as the data gives them
(activations / parameters / input, MiB), our cached features from
`FeatureTable`, and the GPU's characteristics from the catalogue.

`over_capacity` marks the 20 training rows whose value was interpolated above
the card's memory by the authors: they mean "does not fit", not a measurement.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd

from estimator.catalogue import (
    CATALOGUE, CHARACTERISTICS, PAPER_GPUS_BY_CUDA_CORES, PAPER_GPUS_BY_LABEL,
)  # fmt: skip
from estimator.errors import DataMissing
from estimator.feature_table import FeatureTable

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
MEASUREMENTS_FILE = REPO_ROOT / "profiles" / "measurements.csv"
PAPER_DIR = "schedtune-ccgrid22"

#: Targets: name -> (task, unit). Time targets come from reconstructed files.
TARGETS = {
    "train-mem": ("train", "MiB"),
    "train-time": ("train", "s per epoch"),
    "infer-mem": ("inference", "MiB"),
    "infer-time": ("inference", "ms per request"),
}
RECONSTRUCTED = {"train-time", "infer-mem", "infer-time"}


def paper_file(data_dir: Path, name: str) -> Path:
    path = Path(data_dir) / PAPER_DIR / name
    if not path.is_file():
        raise DataMissing(
            f"reference data file {path} is missing; pass --data DIR pointing at the directory "
            f"that holds {PAPER_DIR}/ (default: ../shared/data beside the checkout)"
        )
    return path


def load_target(target: str, data_dir: Path = DEFAULT_DATA_DIR,
                table: FeatureTable | None = None,
                extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows for one target, with features; columns ``y`` and ``gpu`` always present.

    `extra`: more raw rows (model, batch, gpu, y, source), e.g. observed runs.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; accepted: {', '.join(TARGETS)}")
    raw = _read_raw(target, Path(data_dir))
    for more in (_read_measurements(target), extra):
        if more is not None and not more.empty:
            raw = pd.concat([raw, more], ignore_index=True)
    out = with_features(raw, TARGETS[target][0], table or FeatureTable.load())
    out["over_capacity"] = target.endswith("mem") & (out["y"] > out["capacity_mib"])
    return out


def _read_raw(target: str, data_dir: Path) -> pd.DataFrame:
    if target == "train-mem":
        df = pd.read_csv(paper_file(data_dir, "model_stats.csv"))
        df = pd.DataFrame({
            "model": df["model"], "batch": df["batchsize"],
            "gpu": df["Pipelines/CUDA cores"].map(PAPER_GPUS_BY_CUDA_CORES),
            "data_activations_mb": df["activations"], "data_params_mb": df["parameters"],
            "data_input_mb": df["input"], "y": df["peak mem usage"].astype(float),
        })  # fmt: skip
    elif target == "train-time":
        df = pd.read_csv(paper_file(data_dir, "reconstructed_train_time.csv"))
        df = pd.DataFrame({
            "model": df["model"], "batch": df["batchsize"], "gpu": df["gpu"].map(PAPER_GPUS_BY_LABEL),
            "data_activations_mb": df["activations"], "data_params_mb": df["parameters"],
            "data_input_mb": df["input"], "y": df["train_time_s_reconstructed"],
        })  # fmt: skip
    else:
        df = pd.read_csv(paper_file(data_dir, "reconstructed_inference.csv"))
        column = "infer_peak_mem_mb_reconstructed" if target == "infer-mem" else "infer_time_reconstructed"
        df = pd.DataFrame({
            "model": df["model"], "batch": 1, "gpu": df["gpu"].map(PAPER_GPUS_BY_LABEL),
            "data_activations_mb": df["activations"], "data_params_mb": df["parameters"],
            "data_input_mb": 0.0, "y": df[column],
        })  # fmt: skip
    if df["gpu"].isna().any():
        raise DataMissing(f"{target}: rows with a GPU the catalogue does not know")
    df["source"] = "reconstructed" if target in RECONSTRUCTED else "measured"
    return df


def _read_measurements(target: str) -> pd.DataFrame:
    """Our own profiled rows (profiles/measurements.csv) for this target, if any."""
    if not MEASUREMENTS_FILE.exists():
        return pd.DataFrame()
    df = pd.read_csv(MEASUREMENTS_FILE)
    task, _ = TARGETS[target]
    df = df[df["task"] == task]
    column = "peak_mib" if target.endswith("mem") else "seconds"
    if target == "infer-time":
        df = df.assign(seconds=df["seconds"] * 1000.0)
    return pd.DataFrame({
        "model": df["model"], "batch": df["batch"], "gpu": df["gpu"],
        "y": df[column].astype(float), "source": "profiled",
    })  # fmt: skip


def gpu_code(name: str) -> float:
    """A stable number per catalogue GPU type (the group key of per-GPU constants)."""
    return float(list(CATALOGUE).index(name))


def with_features(rows: pd.DataFrame, task: str, table: FeatureTable) -> pd.DataFrame:
    """Join cached features and GPU characteristics onto rows of (model, batch, gpu)."""
    feats = pd.DataFrame([
        asdict(table.job_features(m, task, int(b)))
        for m, b in zip(rows["model"], rows["batch"], strict=True)
    ]).drop(columns=["model", "task", "batch"])  # fmt: skip
    gpus = pd.DataFrame([
        {c: float(getattr(CATALOGUE[g], c)) for c in CHARACTERISTICS}
        | {"capacity_mib": float(CATALOGUE[g].memory_mib), "gpu_code": gpu_code(g)}
        for g in rows["gpu"]
    ])  # fmt: skip
    return pd.concat([rows.reset_index(drop=True), feats, gpus], axis=1)
