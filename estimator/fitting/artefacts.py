"""Trained artefacts: ``profiles/models/<name>.joblib`` plus ``<name>.json`` metadata, and
the numpy form the service loads (``<name>.npz``, `estimator.portable`), written together.

joblib is pickle: only files under ``profiles/models`` of this repository are
loaded, and only when the metadata's library versions match the running ones
(a model pickled by another scikit-learn may load and predict wrongly).
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import sklearn

from estimator import portable
from estimator.errors import ArtefactError
from estimator.fitting.compiling import compile_regressor
from estimator.portable import MODELS_DIR

CHECKED_VERSIONS = ("sklearn", "numpy")


def library_versions() -> dict[str, str]:
    return {"sklearn": sklearn.__version__, "numpy": np.__version__,
            "joblib": joblib.__version__, "python": platform.python_version()}


def data_hash(frame: pd.DataFrame) -> str:
    """sha256 of the training rows as CSV: names the exact data a model was fitted on."""
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


def _git_sha() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=MODELS_DIR.parent.parent, timeout=5, check=False)
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def save(name: str, regressor: Any, meta: dict[str, Any], directory: Path = MODELS_DIR) -> Path:
    """Write the regressor, its numpy form and its metadata (versions and git SHA added
    here)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.joblib"
    joblib.dump(regressor, path, compress=3)
    portable.save(directory / f"{name}.npz", compile_regressor(regressor))
    full = {**meta, "name": name, "versions": library_versions(), "git_sha": _git_sha()}
    (directory / f"{name}.json").write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return path


def remove(name: str, directory: Path = MODELS_DIR) -> None:
    """Delete an artefact's files (one `save` wrote), those that exist."""
    for suffix in (".joblib", ".npz", ".json"):
        (directory / f"{name}{suffix}").unlink(missing_ok=True)


def load(name: str, directory: Path = MODELS_DIR) -> tuple[Any, dict[str, Any]]:
    """Load one artefact; `ArtefactError` if missing, untrusted or version-mismatched."""
    directory = directory.resolve()
    if MODELS_DIR.resolve() not in (directory, *directory.parents):
        raise ArtefactError(f"refusing to unpickle outside {MODELS_DIR}: {directory}")
    path, meta_path = directory / f"{name}.joblib", directory / f"{name}.json"
    if not path.is_file() or not meta_path.is_file():
        raise ArtefactError(f"artefact {name!r} missing in {directory}; run schedtune train")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as exc:
        raise ArtefactError(f"corrupt metadata {meta_path}: {exc}") from exc
    running = library_versions()
    stale = {k: meta.get("versions", {}).get(k) for k in CHECKED_VERSIONS
             if meta.get("versions", {}).get(k) != running[k]}  # fmt: skip
    if stale:
        raise ArtefactError(
            f"artefact {name!r} was saved with {stale}, running {running}: "
            "install requirements.txt or retrain with schedtune train"
        )
    return joblib.load(path), meta
