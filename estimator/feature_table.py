"""Cached model features (profiles/features/*.csv): read, upsert, and look up per job.

No torch here: this is what the request path uses. Two tables, written by
``schedtune features``:

* ``models.csv``: one row per model, torchinfo figures at batch 1 (MiB).
* ``sim_peaks.csv``: one row per (model, task, batch), simulated peak by category.
* ``op_costs.csv``: one row per (model, task, batch), what one step asks of a GPU per
  class of operation (`estimator.simulation.op_costs`); optional: a model without it has
  NaN there.

`FeatureTable.job_features` scales per-sample figures by the batch and
interpolates the simulated peak linearly between cached batches (it is affine
in the batch: activations and temporaries grow with it, the rest is constant),
extrapolating from the two nearest cached batches outside their range.
"""

from __future__ import annotations

import csv
import difflib
import fcntl
import math
import os
import tempfile
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from estimator.errors import EstimatorError, InvalidJob, UnknownModel

FEATURES_DIR = Path(__file__).resolve().parent.parent / "profiles" / "features"
MODELS_FILE = "models.csv"
SIM_FILE = "sim_peaks.csv"
OPS_FILE = "op_costs.csv"
TASKS = ("train", "inference")
MAX_BATCH = 4096

SUMMARY_COLUMNS = (
    "params_mb", "buffers_mb", "activations_mb_per_sample", "input_mb_per_sample",
    "fwd_bwd_mb_per_sample", "mult_adds_g_per_sample",
)  # fmt: skip
#: MemTracker's peak by category and the step's GFLOPs, then the allocator replay
#: (`estimator.simulation.workspace.DeviceMemory`; ``sim_device_mb`` = reserved + workspace).
SIM_COLUMNS = (
    "sim_peak_mb", "sim_params_mb", "sim_grads_mb", "sim_activations_mb",
    "sim_temp_mb", "sim_optimizer_mb", "sim_gflops",
    "sim_allocated_mb", "sim_reserved_mb", "sim_workspace_mb", "sim_workspace_max_mb",
    "sim_largest_alloc_mb", "sim_device_mb",
)  # fmt: skip
#: The columns `estimator.simulation.features.simulate_device` refreshes on their own.
DEVICE_COLUMNS = SIM_COLUMNS[SIM_COLUMNS.index("sim_allocated_mb"):]
#: One step's operations (`estimator.simulation.op_costs.OpCosts`).
OP_COLUMNS = ("op_conv_gflops", "op_mm_gflops", "op_conv_gb", "op_mm_gb", "op_other_gb",
              "op_kernels")


@dataclass(frozen=True)
class JobFeatures:
    """Features of one (model, task, batch), MiB unless named otherwise."""

    model: str
    family: str
    task: str
    batch: int
    params_mb: float
    activations_mb: float
    input_mb: float
    mult_adds_g: float
    torchinfo_total_mb: float
    sim_peak_mb: float
    sim_params_mb: float
    sim_grads_mb: float
    sim_activations_mb: float
    sim_temp_mb: float
    sim_optimizer_mb: float
    sim_gflops: float
    sim_allocated_mb: float
    sim_reserved_mb: float
    sim_workspace_mb: float
    sim_workspace_max_mb: float
    sim_largest_alloc_mb: float
    sim_device_mb: float
    op_conv_gflops: float = math.nan
    op_mm_gflops: float = math.nan
    op_conv_gb: float = math.nan
    op_mm_gb: float = math.nan
    op_other_gb: float = math.nan
    op_kernels: float = math.nan
    sim_workspace_share: float = field(init=False)
    sim_fragmentation_share: float = field(init=False)

    def __post_init__(self) -> None:
        # Derived from the cached columns (never stored): how much of the simulated device
        # memory the worst plausible workspace and the allocator's cached segments are.
        device = self.sim_device_mb if self.sim_device_mb > 0 else float("nan")
        object.__setattr__(self, "sim_workspace_share", self.sim_workspace_max_mb / device)
        object.__setattr__(self, "sim_fragmentation_share",
                           (self.sim_reserved_mb - self.sim_allocated_mb) / device)


class FeatureTable:
    """Read-only view of the cached features."""

    def __init__(self, summaries: Mapping[str, Mapping[str, object]],
                 sims: Mapping[tuple[str, str], Mapping[int, Mapping[str, float]]],
                 ops: Mapping[tuple[str, str], Mapping[int, Mapping[str, float]]] | None = None,
                 ) -> None:
        self._summaries = dict(summaries)
        self._sims = {key: dict(sorted(rows.items())) for key, rows in sims.items()}
        self._ops = {key: dict(sorted(rows.items())) for key, rows in (ops or {}).items()}

    @classmethod
    def load(cls, directory: Path = FEATURES_DIR) -> FeatureTable:
        summaries = {row["model"]: row for row in _read_rows(directory / MODELS_FILE)}
        sims: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
        for row in _read_rows(directory / SIM_FILE):
            missing = [c for c in SIM_COLUMNS if not row.get(c)]
            if missing:
                raise ValueError(f"{directory / SIM_FILE}: {row['model']} {row['task']} "
                                 f"{row['batch']} lacks {', '.join(missing)}; run: "
                                 "schedtune features --all --device-only")
            key = (str(row["model"]), str(row["task"]))
            sims.setdefault(key, {})[int(row["batch"])] = {c: float(row[c]) for c in SIM_COLUMNS}
        ops: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
        for row in _read_rows(directory / OPS_FILE):
            key = (str(row["model"]), str(row["task"]))
            ops.setdefault(key, {})[int(row["batch"])] = {c: float(row[c]) for c in OP_COLUMNS}
        return cls(summaries, sims, ops)

    def with_models(self, summaries: Mapping[str, Mapping[str, object]],
                    sims: Mapping[tuple[str, str], Mapping[int, Mapping[str, float]]]
                    ) -> FeatureTable:
        """This table plus (or with replaced) the given models' rows (no operation costs:
        those of a replaced model are dropped)."""
        ops = {key: rows for key, rows in self._ops.items() if key[0] not in summaries}
        return FeatureTable({**self._summaries, **summaries}, {**self._sims, **sims}, ops)

    def rows_of(self, model: str) -> tuple[object, dict[str, object]]:
        """Everything the table holds of `model` (its summary, its simulated rows per task):
        two tables estimate a model alike when these are equal."""
        return (self._summaries.get(model),
                {t: self._sims[model, t] for t in TASKS if (model, t) in self._sims})

    def family(self, model: str) -> str | None:
        """The model's architecture family (None: not in the table)."""
        summary = self._summaries.get(model)
        return None if summary is None else str(summary["family"])

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(m for m in self._summaries if self.tasks_for(m)))

    def tasks_for(self, model: str) -> tuple[str, ...]:
        return tuple(t for t in TASKS if (model, t) in self._sims)

    def cached_batches(self, model: str, task: str) -> tuple[int, ...]:
        return tuple(self._sims.get((model, task), {}))

    def job_features(self, model: str, task: str, batch: int) -> JobFeatures:
        """Features of one job; raises `UnknownModel` or `InvalidJob`."""
        check_job(task, batch)
        if model not in self._summaries or (model, task) not in self._sims:
            like = close_names(model, [m for m in self.models if (m, task) in self._sims])
            known = (f"did you mean {', '.join(like)}?" if like
                     else f"known models: {', '.join(self.models) or 'none'}.")
            raise UnknownModel(f"no cached {task} features for model {model!r}; {known} "
                               f"Add one with: schedtune features {model}")
        summary = self._summaries[model]
        per = {c: float(summary[c]) for c in SUMMARY_COLUMNS}  # type: ignore[arg-type]
        sim = _interpolate(self._sims[(model, task)], batch, SIM_COLUMNS)
        ops = _interpolate(self._ops[(model, task)], batch, OP_COLUMNS) \
            if (model, task) in self._ops else {}
        return JobFeatures(
            model=model,
            family=str(summary["family"]),
            task=task,
            batch=batch,
            params_mb=per["params_mb"],
            activations_mb=per["activations_mb_per_sample"] * batch,
            input_mb=per["input_mb_per_sample"] * batch,
            mult_adds_g=per["mult_adds_g_per_sample"] * batch,
            torchinfo_total_mb=per["params_mb"]
            + (per["input_mb_per_sample"] + per["fwd_bwd_mb_per_sample"]) * batch,
            **sim,
            **ops,
        )


def close_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """At most `n` of `known` that `name` may have meant (never `name` itself): those that
    differ from it by case only, else `difflib`'s close matches, case ignored, best first."""
    names = sorted(set(known) - {name})
    folded = name.casefold()
    same = [k for k in names if k.casefold() == folded]
    if same:
        return same[:n]
    close = difflib.get_close_matches(folded, [k.casefold() for k in names], n=n)
    return list(dict.fromkeys(k for c in close for k in names if k.casefold() == c))[:n]


def check_job(task: str, batch: int) -> None:
    """Validate task and batch; `InvalidJob` says what is accepted."""
    if task not in TASKS:
        raise InvalidJob(f"unknown task {task!r}; accepted: {', '.join(TASKS)}")
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise InvalidJob(f"batch size must be an integer in 1..{MAX_BATCH}, got {batch!r}")


def _interpolate(rows: Mapping[int, Mapping[str, float]], batch: int,
                 columns: tuple[str, ...]) -> dict[str, float]:
    batches = list(rows)
    if batch in rows:
        return dict(rows[batch])
    if len(batches) == 1:
        return dict(rows[batches[0]])
    i = min(max(bisect_left(batches, batch), 1), len(batches) - 1)
    lo, hi = batches[i - 1], batches[i]
    w = (batch - lo) / (hi - lo)
    return {c: max(0.0, rows[lo][c] + w * (rows[hi][c] - rows[lo][c])) for c in columns}


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a feature CSV as strings (none when the file is absent)."""
    return _read_rows(path)


def _read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def upsert(path: Path, key_columns: Iterable[str], records: Iterable[object]) -> None:
    """Insert or replace records (dataclasses or mappings) in a CSV, atomically and under
    a file lock."""
    keys = tuple(key_columns)
    new_rows = [{k: _fmt(v) for k, v in _fields(r).items()} for r in records]
    if not new_rows:
        return
    columns = list(new_rows[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = {tuple(r[k] for k in keys): r for r in _cached_rows(path, keys, columns)}
        merged.update({tuple(r[k] for k in keys): r for r in new_rows})
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
                writer.writeheader()
                writer.writerows(merged[k] for k in sorted(merged, key=_sort_key))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


def _cached_rows(path: Path, keys: tuple[str, ...], columns: list[str]) -> list[dict[str, str]]:
    """The rows `upsert` merges with; `EstimatorError` when `path` is not a table it wrote."""
    try:
        rows = _read_rows(path)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise EstimatorError(f"{path} is not a readable CSV ({exc}); move it away and run "
                             "again") from exc
    for line, row in enumerate(rows, start=2):
        unknown = sorted(str(c) for c in set(row) - set(columns))
        if unknown or any(not row.get(k) for k in keys):
            raise EstimatorError(f"{path}: line {line} is not a feature row of this version "
                                 f"(needs {', '.join(keys)}; unknown columns: "
                                 f"{', '.join(unknown) or 'none'}); move the file away and "
                                 "run again")
    return rows


def _fields(record: object) -> Mapping[str, object]:
    return record if isinstance(record, Mapping) else asdict(record)  # type: ignore[call-overload]


def _sort_key(key: tuple[str, ...]) -> tuple[object, ...]:
    return tuple(int(k) if k.isdigit() else k for k in key)


def _fmt(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)
