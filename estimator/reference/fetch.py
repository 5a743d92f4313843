"""`schedtune data fetch`: the paper's reference data from the authors' public artefact
(MIT, github.com/Stone-ResearchLife/Scheduler-SchedTune-CCGrid-2022, one pinned commit)
into a data directory, each file checked against its committed SHA-256 before it is kept.

The artefact holds the measured files (`model_stats.csv`, `baseline_arrival_times.csv`,
its LICENSE) and random forests for the data the authors did not publish (training
time, inference memory and time); the `reconstructed_*.csv` tables are those forests'
predictions at every (model, batch, GPU) point, rebuilt here (`authors_forests`). Rebuilt
from the pinned files they equal, to the digit, the tables `../shared/data` holds
(checked 2026-12-03: 240 training-time and 60 inference rows).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import requests

from estimator.reference.forests import load_forest
from estimator.catalogue import PAPER_GPUS_BY_CUDA_CORES, PAPER_GPUS_BY_LABEL
from estimator.reference.tables import PAPER_DIR
from estimator.errors import EstimatorError

ARTEFACT = ("https://raw.githubusercontent.com/Stone-ResearchLife/"
            "Scheduler-SchedTune-CCGrid-2022/1e2f7175476e52658cd6200c89e51b58bb725e73")
#: name -> SHA-256 of the file at the pinned commit.
CHECKSUMS = {
    "LICENSE": "d21511776549d4a1cdd60fd2f0f5d61a1ffb67cc992a3dd86706a3865c05adc2",
    "model_stats.csv": "ad1edbf5e5c329ecf122e4b37ce0574c4cbdd93b027a6cc8033fffcbf4aaff1b",
    "baseline_arrival_times.csv":
        "5bbb33127cf457e7e9cc98f6acddf9423e51537bee71c2605a566b91cbf20376",
    "train_time_RFR_5params.joblib":
        "6cc38cce30f130421dab76db38e789d034dc5eee3bd10f1b5b7604136cd214c4",
    "infer_mem_RFR_5params.joblib":
        "6649e9efa42440c241909da32f5d3f9a8112cac8a6fe5d08eec48dfcb41c90eb",
    "infer_time_RFR_5params.joblib":
        "14245ca241eb9dff5414dc15c78f28f1e3be4c5730b27d8b05269ea820672465",
}
FORESTS_DIR = "forests"  # beside the tables: the artefact's forests, as fetched
TIMEOUT_S = 60
Progress = Callable[[str], None]


def fetch(into: Path, source: str = ARTEFACT, checksums: dict[str, str] = CHECKSUMS,
          progress: Progress = print) -> Path:
    """Download every file of `checksums` from `source` into `into` (the directory that
    then holds the paper's files: `into/schedtune-ccgrid22/`), then rebuild the
    reconstructed tables. A file already there with the right checksum is kept; one
    whose checksum differs is an error and nothing of it is kept."""
    target = Path(into) / PAPER_DIR
    (target / FORESTS_DIR).mkdir(parents=True, exist_ok=True)
    for name, digest in checksums.items():
        path = target / (f"{FORESTS_DIR}/{name}" if name.endswith(".joblib") else name)
        if path.is_file() and sha256(path.read_bytes()) == digest:
            progress(f"{name}: present, checksum matches")
            continue
        _download(f"{source.rstrip('/')}/{name}", path, digest)
        progress(f"{name}: fetched, checksum matches")
    for name, table in reconstructed_tables(target).items():
        _write_atomically(target / name, table.to_csv(index=False).encode())
        progress(f"{name}: rebuilt from the authors' forests ({len(table)} rows)")
    return target


def reconstructed_tables(paper_dir: Path) -> dict[str, pd.DataFrame]:
    """The forests' predictions at the measured points: training time per epoch at every
    (model, batch, GPU) row of model_stats.csv, inference memory and time per (model,
    GPU) with batch 8's activations (the columns and rounding of the shared tables)."""
    stats = pd.read_csv(paper_dir / "model_stats.csv")
    labels = {gpu: label for label, gpu in PAPER_GPUS_BY_LABEL.items()}
    stats["gpu"] = [labels[PAPER_GPUS_BY_CUDA_CORES[int(c)]]
                    for c in stats["Pipelines/CUDA cores"]]
    stats["Tensor Cores (GPU)"] = stats["Tensor cores"]  # the inference forests' name
    forests = paper_dir / FORESTS_DIR

    def predict(name: str, rows: pd.DataFrame) -> pd.Series:
        forest = load_forest(forests / name)
        missing = set(forest.features) - set(rows.columns)
        if missing:
            raise EstimatorError(f"{name} needs {', '.join(sorted(missing))}, which "
                                 "model_stats.csv lacks")
        return pd.Series(forest.predict(rows[list(forest.features)].to_numpy()), rows.index)

    train = stats[["model", "batchsize", "gpu", "activations", "parameters", "input"]].copy()
    train["train_time_s_reconstructed"] = predict("train_time_RFR_5params.joblib",
                                                  stats).round(1)
    batch8 = stats[stats["batchsize"] == 8]
    infer = batch8[["model", "gpu", "activations", "parameters"]].copy()
    infer["infer_peak_mem_mb_reconstructed"] = predict("infer_mem_RFR_5params.joblib",
                                                       batch8).round(0)
    infer["infer_time_reconstructed"] = predict("infer_time_RFR_5params.joblib",
                                                batch8).round(1)
    return {"reconstructed_train_time.csv": train, "reconstructed_inference.csv": infer}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(url: str, path: Path, digest: str) -> None:
    try:
        response = requests.get(url, timeout=TIMEOUT_S)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise EstimatorError(f"could not fetch {url}: {exc}") from exc
    got = sha256(response.content)
    if got != digest:
        raise EstimatorError(f"{url}: SHA-256 {got}, expected {digest} (the artefact "
                             "changed, or the download was altered); nothing kept")
    _write_atomically(path, response.content)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write beside `path`, then rename over it: a reader sees the old file or the new."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
