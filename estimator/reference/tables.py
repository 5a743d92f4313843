"""Training data: the authors' reference data (read in place) joined with our features.

The reference data never enters the repository: it is read from a data directory
(`find_data_dir`: ``--data``, ``SCHEDTUNE_DATA``, ``../shared/data`` beside the checkout,
then the cache ``schedtune data fetch`` fills). Our own measurements
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

import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from estimator.catalogue import (
    CATALOGUE, CHARACTERISTICS, PAPER_GPUS_BY_CUDA_CORES, PAPER_GPUS_BY_LABEL,
)  # fmt: skip
from estimator import roofline
from estimator.errors import DataMissing, EstimatorError
from estimator.feature_table import MAX_BATCH, FeatureTable
from estimator.predict import SECONDS_PER_UNIT

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
MEASUREMENTS_FILE = REPO_ROOT / "profiles" / "measurements.csv"
#: Our ground truth on current GPUs (`scripts/gpu_ground_truth.sh`): evaluated against,
#: not fitted on by default (see README, "Ground truth on an H200").
MEASURED_DIR = REPO_ROOT / "profiles" / "measured"
#: Where `schedtune profile --collocate` upserts its rows by default.
COLLOCATION_FILE = REPO_ROOT / "profiles" / "collocation.csv"
PAPER_DIR = "schedtune-ccgrid22"
DATA_ENV = "SCHEDTUNE_DATA"
DATA_HELP = ("the reference data (default: $SCHEDTUNE_DATA, else ../shared/data beside the "
             "checkout, else the cache `schedtune data fetch` fills)")


def cache_data_dir() -> Path:
    """Where `schedtune data fetch` puts the reference data by default."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "schedtune" / "data"


def find_data_dir(explicit: Path | None = None) -> Path:
    """The data directory: `explicit` (``--data``), else ``SCHEDTUNE_DATA``, taken as
    given; else the first of ``../shared/data`` beside the checkout and the cache that
    holds the paper's files; else the cache (absent: tools say how to fill it)."""
    if explicit is not None:
        return Path(explicit)
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return next((d for d in (SHARED_DATA_DIR, cache_data_dir()) if (d / PAPER_DIR).is_dir()),
                cache_data_dir())

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
            f"reference data file {path} is missing: `schedtune data fetch` downloads the "
            f"authors' files into {cache_data_dir()}, or pass --data DIR (or set "
            f"{DATA_ENV}) naming the directory that holds {PAPER_DIR}/"
        )
    return path


def load_target(target: str, data_dir: Path | None = None,
                table: FeatureTable | None = None,
                extra: pd.DataFrame | None = None,
                measurements: Path | None = MEASUREMENTS_FILE) -> pd.DataFrame:
    """Rows for one target, with features; columns ``y`` and ``gpu`` always present.

    `extra`: more raw rows (model, batch, gpu, y, source), e.g. observed runs.
    `measurements`: profiled rows (`schedtune profile`'s CSV), added when the file exists.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; accepted: {', '.join(TARGETS)}")
    raw = _read_raw(target, find_data_dir(data_dir))
    profiled = read_measurements(target, measurements) if measurements else None
    for more in (profiled, extra):
        if more is not None and not more.empty:
            raw = pd.concat([raw, more], ignore_index=True)
    out = with_features(raw, TARGETS[target][0], table or FeatureTable.load())
    out["over_capacity"] = target.endswith("mem") & (out["y"] > out["capacity_mib"])
    return with_step_columns(out, target) if target in SECONDS_PER_UNIT else out


def with_step_columns(rows: pd.DataFrame, target: str) -> pd.DataFrame:
    """The columns `estimator.roofline` reads beyond the features: steps and samples per
    unit (an epoch of CIFAR-10's training images at the row's batch; one forward pass per
    request), the unit in seconds (`estimator.predict.SECONDS_PER_UNIT`), whether an input pipeline feeds the steps (the authors'
    training rows: their CIFAR-10 loader; profiled rows run on synthetic input), and the
    GPU's peak rates."""
    train = target == "train-time"
    return rows.assign(
        **roofline.step_columns(rows["batch"].to_numpy(float), train),
        unit_s=SECONDS_PER_UNIT[target],
        input_pipeline=((rows["source"] != "profiled") & train).astype(float),
        **pd.DataFrame([roofline.gpu_columns(g) for g in rows["gpu"]], index=rows.index),
    )


def _read_raw(target: str, data_dir: Path) -> pd.DataFrame:
    if target == "train-mem":
        path = paper_file(data_dir, "model_stats.csv")
        df = _read_csv(path, ("model", "batchsize", "Pipelines/CUDA cores", "activations",
                              "parameters", "input", "peak mem usage"))
        df = pd.DataFrame({
            "model": df["model"], "batch": _batches(path, df["batchsize"]),
            "gpu": df["Pipelines/CUDA cores"].map(PAPER_GPUS_BY_CUDA_CORES),
            **_sizes(path, df, "input"), "y": _positive(path, df["peak mem usage"]),
        })  # fmt: skip
    elif target == "train-time":
        path = paper_file(data_dir, "reconstructed_train_time.csv")
        df = _read_csv(path, ("model", "batchsize", "gpu", "activations", "parameters", "input",
                              "train_time_s_reconstructed"))
        df = pd.DataFrame({
            "model": df["model"], "batch": _batches(path, df["batchsize"]),
            "gpu": df["gpu"].map(PAPER_GPUS_BY_LABEL), **_sizes(path, df, "input"),
            "y": _positive(path, df["train_time_s_reconstructed"]),
        })  # fmt: skip
    else:
        path = paper_file(data_dir, "reconstructed_inference.csv")
        column = "infer_peak_mem_mb_reconstructed" if target == "infer-mem" else "infer_time_reconstructed"
        df = _read_csv(path, ("model", "gpu", "activations", "parameters", column))
        df = pd.DataFrame({
            "model": df["model"], "batch": 1, "gpu": df["gpu"].map(PAPER_GPUS_BY_LABEL),
            **_sizes(path, df), "data_input_mb": 0.0, "y": _positive(path, df[column]),
        })  # fmt: skip
    if df["gpu"].isna().any():
        raise DataMissing(f"{path}: rows with a GPU the catalogue does not know")
    df["source"] = "reconstructed" if target in RECONSTRUCTED else "measured"
    return df


def _read_csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A reference CSV with at least one row and `columns`; `EstimatorError` says why not."""
    try:
        df = pd.read_csv(path, encoding="utf-8")
    except pd.errors.EmptyDataError as exc:
        raise EstimatorError(f"{path} is empty") from exc
    except UnicodeDecodeError as exc:
        raise EstimatorError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
                             ) from exc
    except pd.errors.ParserError as exc:
        raise EstimatorError(f"{path} is not a readable CSV: {exc}") from exc
    if missing := [c for c in columns if c not in df.columns]:
        raise EstimatorError(f"{path} lacks the columns {missing}")
    if df.empty:
        raise EstimatorError(f"{path} has a header but no rows")
    return df


def _numbers(path: Path, values: pd.Series, what: str, valid) -> pd.Series:
    """`values` as floats; `EstimatorError` names the first row (file line) that is not
    `what`."""
    numbers = pd.to_numeric(values, errors="coerce").astype(float)
    bad = ~(np.isfinite(numbers) & valid(numbers))
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        value = values.iloc[i]
        shown = "an empty cell" if pd.isna(value) else repr(str(value)[:40])
        raise EstimatorError(f"{path}: data row {i + 1}: {values.name!r} must be {what}, "
                             f"got {shown}")
    return numbers


def _positive(path: Path, values: pd.Series) -> pd.Series:
    return _numbers(path, values, "a positive number", lambda v: v > 0)


def _sizes(path: Path, df: pd.DataFrame, *more: str) -> dict[str, pd.Series]:
    """The paper's feature columns (MiB, >= 0) under our names."""
    names = {"activations": "data_activations_mb", "parameters": "data_params_mb",
             "input": "data_input_mb"}
    return {names[c]: _numbers(path, df[c], "a number >= 0", lambda v: v >= 0)
            for c in ("activations", "parameters", *more)}


def _batches(path: Path, values: pd.Series) -> pd.Series:
    return _numbers(path, values, f"an integer in 1..{MAX_BATCH}",
                    lambda v: (v >= 1) & (v <= MAX_BATCH) & (v % 1 == 0)).astype(int)


def measurements_option(text: str) -> Path | None:
    """A CLI's `--measurements` value: a CSV path, or "none" for the reference rows alone."""
    return None if text.strip().lower() == "none" else Path(text)


def read_measurements(target: str, path: Path = MEASUREMENTS_FILE) -> pd.DataFrame:
    """Profiled rows (`schedtune profile`'s CSV at `path`) for this target, if the file
    exists; `EstimatorError` names the first row that is not a measurement."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame()
    if not path.is_file():
        raise EstimatorError(f"{path} is not a file of profiled rows")
    df = _read_csv(path, ("model", "task", "batch", "gpu", "peak_mib", "seconds"))
    keys = df[["model", "task", "batch", "gpu"]].astype(str)
    if keys.duplicated().any():
        row = keys[keys.duplicated()].iloc[0]
        raise EstimatorError(f"{path}: ({', '.join(row)}) is measured twice; keep one row per "
                             "(model, task, batch, gpu)")
    if unknown := sorted(set(df["gpu"].astype(str)) - set(CATALOGUE)):
        raise EstimatorError(f"{path}: GPU types the catalogue does not know: {unknown[:5]}")
    if bad := sorted(set(df["task"].astype(str)) - {task for task, _ in TARGETS.values()}):
        raise EstimatorError(f"{path}: unknown tasks {bad[:5]}; accepted: train, inference")
    checked = {c: _positive(path, df[c]) for c in ("peak_mib", "seconds")}  # every row, so
    batches = _batches(path, df["batch"])  # a message's row number is the file's
    ours = (df["task"] == TARGETS[target][0]).to_numpy()
    y = checked["peak_mib" if target.endswith("mem") else "seconds"][ours]
    return pd.DataFrame({
        "model": df["model"][ours].astype(str), "batch": batches[ours], "gpu": df["gpu"][ours],
        "y": y * 1000.0 if target == "infer-time" else y, "source": "profiled",
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
