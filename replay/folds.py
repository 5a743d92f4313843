"""Held-out artefacts for held-out worlds: every estimator that takes decisions, trained
without the job's model (``lomo``) or its architecture family (``lofo``).

One fold per model (or family) in the training rows. Each fold's artefacts (every
target, ours and the paper's RFR, and the time targets' roofline, which prices GPU types
the others never saw: `estimator.predict`) are fitted by the estimator's own training code
(`estimator.fitting.training.fit`, pads held out inside the fold) and saved with
`estimator.fitting.artefacts.save` into a cache directory, never into profiles/:
``CACHE/<digest>/<protocol>/<fold>/``, the digest naming the training rows (features
included) and the estimator's source, so a change to either trains again. A fold is
written to a temporary directory and renamed when complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from estimator.fitting import artefacts
from estimator.fitting.training import artefact_name, fit
from estimator.fitting.regressors import DESIGNS as REGRESSOR_DESIGNS
from estimator.predict import HARDWARE_DESIGN, TIME_TARGETS, Estimator
from estimator.reference.tables import TARGETS, load_target
from estimator.zoo import REGISTRY

PROTOCOLS = ("lomo", "lofo")
DESIGNS = ("ours", "paper-rfr")
DONE = "fold.json"
ESTIMATOR_SOURCE = Path(__file__).resolve().parent.parent / "estimator"


def default_cache(home: Path) -> Path:
    return home / ".cache" / "schedtune" / "folds"


def fold_of(model: str, protocol: str) -> str:
    """The fold a job of `model` is decided by: its model (lomo) or its family (lofo)."""
    if protocol == "lomo":
        return model
    return REGISTRY[model].family if model in REGISTRY else model


def digest(frames: Mapping[str, pd.DataFrame]) -> str:
    """Names the training rows and the code that fits them."""
    sha = hashlib.sha256()
    for target in sorted(frames):
        sha.update(target.encode())
        sha.update(frames[target].to_csv(index=False).encode())
    for path in sorted(ESTIMATOR_SOURCE.rglob("*.py")):  # its subpackages too
        sha.update(path.relative_to(ESTIMATOR_SOURCE).as_posix().encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()[:16]


def _train_fold(frames: Mapping[str, pd.DataFrame], protocol: str, fold: str,
                directory: Path) -> Path:
    tmp = directory.parent / f".{fold}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    def kept(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["model"].map(lambda m: fold_of(m, protocol)) != fold].reset_index(
            drop=True)

    for target, frame in frames.items():
        designs = (*DESIGNS, HARDWARE_DESIGN) if target in TIME_TARGETS.values() else DESIGNS
        for design in designs:
            other = REGRESSOR_DESIGNS[target][design].fit_target
            regressor, meta = fit(target, design, kept(frame), with_stats=False,
                                  fit_frame=None if other is None else kept(frames[other]))
            meta["held_out"] = {"protocol": protocol, "fold": fold}
            artefacts.save(artefact_name(target, design), regressor, meta, tmp)
    (tmp / DONE).write_text(json.dumps({"protocol": protocol, "fold": fold}) + "\n")
    try:
        tmp.rename(directory)
    except OSError:  # another process finished it first
        shutil.rmtree(tmp, ignore_errors=True)
    return directory


def train_folds(protocol: str, data_dir: Path, cache_dir: Path, workers: int = 1,
                log: Callable[[str], None] = lambda _: None) -> dict[str, Path]:
    """fold -> its artefact directory, training the folds not cached yet (on `workers`
    processes). Raises `DataMissing` without the reference data."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; accepted: {', '.join(PROTOCOLS)}")
    frames = {target: load_target(target, data_dir) for target in TARGETS}
    root = Path(cache_dir) / digest(frames) / protocol
    root.mkdir(parents=True, exist_ok=True)
    folds = sorted({fold_of(m, protocol) for f in frames.values() for m in f["model"]})
    dirs = {fold: root / fold for fold in folds}
    missing = [f for f in folds if not (dirs[f] / DONE).is_file()]
    if missing:
        log(f"training {len(missing)} {protocol} folds into {root}")
        with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
            list(pool.map(_train_fold, [frames] * len(missing), [protocol] * len(missing),
                          missing, [dirs[f] for f in missing]))
    return dirs


def load_estimators(dirs: Mapping[str, Path], design: str) -> dict[str, Estimator]:
    """One estimator per fold, read from its numpy artefacts."""
    return {fold: Estimator.load(models_dir=path, design=design) for fold, path in dirs.items()}
