"""One call, every GPU type: predicted and padded memory, fit, and run time for a job.

`Estimator.load()` reads the cached features and the four trained artefacts
once; `estimate(job, free_mib)` then needs no torch and no I/O. Per-unit
figures (memory, seconds per epoch or per request) depend only on
(model, task, batch) and are memoised, so repeated jobs cost a dict lookup;
`warm()` fills the memo for every profiled batch in one batched pass.

GPU types of the catalogue that no training row covers are predicted with the
largest per-GPU constant learned (the safe side) and the larger held-out pad
(leave one GPU out), and reported with ``seen_in_training=False``. A model whose
architecture family no training row covers (every model users register, every
transformer today) gets the pad calibrated by leave one family out
(``pad_unseen_family``: a fraction and MiB), or the job's simulated workspace range with
its own pad when that is larger (`estimator.padding.padded_unseen_family`), reported with
``family_seen=False``; both unseen: the larger of the two pads. A product
that is not in the catalogue at all gets `estimate_unknown`: the largest padded
memory and the longest time over every catalogue type. Profiling one job on a
new GPU (schedtune profile) and retraining makes it a seen type; a card profiled with
enough models that the reference rows do not cover gets a memory artefact of its own
(``train-mem.ours.H200``: `estimator.fitting.own_fits`), its own predictions and pads (a
family new to it padded at least as the shared artefact pads one: `_pad`), and the
reference cards keep theirs.

Run time on a GPU type the time artefacts never saw, or saw in fewer rows than
`estimator.card_rates.MIN_ROWS` and than their best-covered type (one calibration job:
``priced_gpus``), comes from the hardware instead
(`estimator.roofline`, artefacts ``train-time.roofline`` and ``infer-time.roofline``): the
job's traced operations priced at that type's own data-sheet rates, as a step runs on
synthetic input (no data loader); on the types they saw, the time artefacts as trained. A
model without traced operations (registered by users) keeps the time artefacts
everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from estimator import portable, roofline
from estimator.catalogue import CATALOGUE, CHARACTERISTICS
from estimator.errors import ArtefactError, InvalidJob, UnknownGPU
from estimator.feature_table import FEATURES_DIR, FeatureTable, JobFeatures
from estimator.padding import (
    affine_family_padded,
    padded_unseen_family,
    padded_unseen_gpu,
    workspace_range,
)

MAX_UNITS = 10**6
MEMO_SIZE = 8192  # (model, task, batch) figures kept per process
MEMORY_TARGETS = {"train": "train-mem", "inference": "infer-mem"}
TIME_TARGETS = {"train": "train-time", "inference": "infer-time"}
#: Seconds per unit of each time target (per epoch; per request, in ms).
SECONDS_PER_UNIT = {"train-time": 1.0, "infer-time": 1e-3}
HARDWARE_DESIGN = "roofline"  # the time artefacts of GPU types the others never saw


@dataclass(frozen=True)
class Job:
    """A job as annotated: `units` is epochs (train) or requests (inference)."""

    model: str
    task: str
    batch: int
    units: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.units, bool) or not isinstance(self.units, int) or not (
            1 <= self.units <= MAX_UNITS
        ):
            raise InvalidJob(f"epochs/requests must be an integer in 1..{MAX_UNITS}, "
                             f"got {self.units!r}")


class Figures(NamedTuple):
    """One job on one GPU type, per unit: what `estimate` scales by the job's units."""

    mib: float
    pad: float
    unit_s: float
    gpu_seen: bool
    family_seen: bool


@dataclass(frozen=True)
class GpuEstimate:
    gpu: str
    predicted_mib: float
    padded_mib: float
    pad: float
    predicted_s: float
    seen_in_training: bool
    capacity_mib: int
    fits: bool | None
    family_seen: bool = True


@dataclass(frozen=True)
class _Predictor:
    regressor: portable.Regressor
    meta: dict[str, Any]

    @property
    def columns(self) -> list[str]:
        return list(self.meta["columns"])

    def seen(self, gpu: str) -> bool:
        return gpu in self.meta["seen_gpus"]

    def prices(self, gpu: str) -> bool:
        """A time artefact prices a card with rows enough of its own (``priced_gpus``;
        artefacts without the list: every card seen)."""
        return gpu in self.meta.get("priced_gpus", self.meta["seen_gpus"])

    def family_seen(self, family: str, table: FeatureTable) -> bool:
        """Artefacts that do not list their families have them from their models'."""
        families = self.meta.get("seen_families") or {
            table.family(m) for m in self.meta.get("models", ())}
        return family in families

    def padded(self, predicted_mib: float, workspace_mib: float, gpu_seen: bool,
               family_seen: bool) -> float:
        """Seen: the leave-one-model-out pad; an unseen GPU type: its own pad or the
        workspace range's (`estimator.padding.padded_unseen_gpu`); an unseen family: also
        the family's affine pads (`estimator.padding.padded_unseen_family`; artefacts
        without a family pad use the largest plain pad they have)."""
        pad = float(self.meta["pad_seen" if gpu_seen else "pad_unseen_gpu"])
        if family_seen and gpu_seen:
            return predicted_mib * (1.0 + pad)
        if family_seen:
            return float(padded_unseen_gpu(predicted_mib, workspace_mib, pad, self.meta))
        if "pad_unseen_family" not in self.meta:
            return predicted_mib * (1.0 + max(pad, float(self.meta["pad_unseen_gpu"])))
        return float(padded_unseen_family(predicted_mib, workspace_mib, pad, self.meta))


def _pad(memory: _Predictor, shared: _Predictor, predicted_mib: float, workspace_mib: float,
         gpu_seen: bool, family_seen: bool) -> float:
    """The pad as a fraction of the prediction (the workspace margin is MiB). A family new to
    a card's own fit (`memory` is not `shared`) is padded at least as the shared fit pads a
    family new to it: each fit's held-out families calibrate the pad of a new one, and a
    card's own fit, however many families it holds, is one card and one software stack."""
    padded = memory.padded(predicted_mib, workspace_mib, gpu_seen, family_seen)
    if memory is not shared and not family_seen and "pad_unseen_family" in shared.meta:
        padded = max(padded, float(affine_family_padded(predicted_mib, shared.meta)))
    return padded / predicted_mib - 1.0


class Estimator:
    def __init__(self, table: FeatureTable, predictors: Mapping[str, _Predictor],
                 hardware: Mapping[str, _Predictor] | None = None,
                 own: Mapping[str, Mapping[str, _Predictor]] | None = None) -> None:
        self.table = table
        self._predictors = dict(predictors)
        self._hardware = dict(hardware or {})  # time target -> the roofline artefact
        # memory target -> card -> the artefact fitted on the card's own rows
        self._own = {t: dict(cards) for t, cards in (own or {}).items()}
        self._gpus = tuple(CATALOGUE)
        self._gpu_rows = {
            "gpu_code": np.arange(len(self._gpus), dtype=float),
            **{c: np.array([float(getattr(CATALOGUE[g], c)) for g in self._gpus])
               for c in CHARACTERISTICS},
        }  # fmt: skip
        self._memo: dict[tuple[str, str, int], dict[str, Figures]] = {}

    @classmethod
    def load(cls, models_dir: Path = portable.MODELS_DIR, features_dir: Path = FEATURES_DIR,
             design: str = "ours") -> Estimator:
        """The artefacts' numpy form: no scikit-learn import, no unpickling."""
        predictors, own = {}, {}
        for target in (*MEMORY_TARGETS.values(), *TIME_TARGETS.values()):
            regressor, meta = portable.load(f"{target}.{design}", models_dir)
            predictors[target] = _Predictor(regressor, meta)
        for target in MEMORY_TARGETS.values():  # the cards fitted on their own rows
            prefix = f"{target}.{design}."
            own[target] = {path.stem.removeprefix(prefix): _Predictor(
                *portable.load(path.stem, models_dir))
                for path in sorted(models_dir.glob(f"{prefix}*.npz"))
                if path.stem.removeprefix(prefix) in CATALOGUE}
        hardware = {}
        for target in TIME_TARGETS.values():
            try:
                hardware[target] = _Predictor(*portable.load(f"{target}.{HARDWARE_DESIGN}",
                                                             models_dir))
            except ArtefactError:  # directories trained before it (held-out folds)
                continue
        return cls(FeatureTable.load(features_dir), predictors, hardware, own)

    @property
    def models(self) -> tuple[str, ...]:
        return self.table.models

    def use_table(self, table: FeatureTable) -> int:
        """Estimate from `table` from now on (models registered or removed at run time).
        A model's estimates rest on its own rows only, so the memo keeps those of every
        model whose rows are unchanged and predicts the rest; returns how many were
        predicted (a registry change costs what it changed)."""
        old, self.table = self.table, table
        same = {m for m in {m for m, _, _ in self._memo} if old.rows_of(m) == table.rows_of(m)}
        self._memo = {key: figures for key, figures in self._memo.items() if key[0] in same}
        return self.warm()

    def metadata(self) -> dict[str, dict[str, Any]]:
        return {t: p.meta for t, p in self._predictors.items()}

    def estimate(self, job: Job, free_mib: Mapping[str, float] | None = None,
                 gpus: Iterable[str] | None = None) -> dict[str, GpuEstimate]:
        """Per GPU type (all catalogue types unless `gpus` names some).

        `fits` is whether the padded memory fits `free_mib[gpu]` (None when no
        free memory is given for that type). Raises `UnknownModel`,
        `InvalidJob` or `UnknownGPU`.
        """
        per_unit = self._per_unit(job.model, job.task, job.batch)
        names = self._gpus if gpus is None else tuple(gpus)
        out = {}
        for name in names:
            if name not in per_unit:
                raise UnknownGPU(f"unknown GPU type {name!r}; catalogue: {', '.join(self._gpus)}")
            mem, pad, unit_s, seen, family_seen = per_unit[name]
            free = None if free_mib is None else free_mib.get(name)
            padded = mem * (1.0 + pad)
            out[name] = GpuEstimate(
                gpu=name, predicted_mib=mem, padded_mib=padded, pad=pad,
                predicted_s=unit_s * job.units, seen_in_training=seen,
                capacity_mib=CATALOGUE[name].memory_mib,
                fits=None if free is None else bool(padded <= free), family_seen=family_seen,
            )  # fmt: skip
        return out

    def estimate_unknown(self, job: Job, free_mib: float | None = None) -> GpuEstimate:
        """Safe fallback for a GPU outside the catalogue: the worst case over all types."""
        every = self.estimate(job).values()
        padded = max(e.padded_mib for e in every)
        return GpuEstimate(
            gpu="unknown", predicted_mib=max(e.predicted_mib for e in every), padded_mib=padded,
            pad=max(e.pad for e in every), predicted_s=max(e.predicted_s for e in every),
            seen_in_training=False, capacity_mib=0,
            fits=None if free_mib is None else bool(padded <= free_mib),
            family_seen=all(e.family_seen for e in every),
        )  # fmt: skip

    def warm(self) -> int:
        """Predict every cached (model, task, batch) not memoised yet, one batched call per
        target (about 40 ms for all), so requests for profiled batches never pay a cold
        prediction (about 5 ms each). Returns how many were predicted."""
        jobs = [(m, t, b) for m in self.table.models for t in self.table.tasks_for(m)
                for b in self.table.cached_batches(m, t) if (m, t, b) not in self._memo]
        for task in {t for _, t, _ in jobs}:
            keys = sorted(k for k in jobs if k[1] == task)  # each model's batches ascending
            for key, figures in zip(keys, self._compute_many(task, keys), strict=True):
                self._memo[key] = self._no_less_than_smaller_batches(key, figures)
        return len(jobs)

    def _per_unit(self, model: str, task: str, batch: int) -> dict[str, Figures]:
        key = (model, task, batch)
        figures = self._memo.get(key)
        if figures is None:
            figures = self._no_less_than_smaller_batches(key, self._compute_many(task, [key])[0])
            if len(self._memo) >= MEMO_SIZE:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = figures
        return figures

    def _no_less_than_smaller_batches(self, key: tuple[str, str, int],
                                      figures: dict[str, Figures]) -> dict[str, Figures]:
        """A larger batch never needs less memory: the prediction is raised to that of every
        cached smaller batch of the job on the same GPU type (the residual forest is not
        monotone in the batch, nor are the measured residuals)."""
        model, task, batch = key
        smaller = [b for b in self.table.cached_batches(model, task) if b < batch]
        if not smaller:
            return figures
        below = self._per_unit(model, task, max(smaller))  # itself raised to those below it
        return {gpu: f._replace(mib=max(f.mib, below[gpu].mib)) for gpu, f in figures.items()}

    def _compute_many(self, task: str, keys: list[tuple[str, str, int]]
                      ) -> list[dict[str, Figures]]:
        """gpu -> `Figures` for every catalogue type, per job of one task."""
        features = [self.table.job_features(m, task, b) for m, _, b in keys]
        mem_target, time_target = MEMORY_TARGETS[task], TIME_TARGETS[task]
        mem = self._predict(mem_target, features)
        unit_s = self._predict(time_target, features) * SECONDS_PER_UNIT[time_target]
        unseen = [i for i, g in enumerate(self._gpus)
                  if not self._predictors[time_target].prices(g)]
        if time_target in self._hardware and unseen:
            from_hardware = self._from_hardware(time_target, features, unseen)
            traced = ~np.isnan(from_hardware[:, 0])
            unit_s[np.ix_(traced, unseen)] = from_hardware[traced] * SECONDS_PER_UNIT[time_target]
        own = self._own.get(mem_target, {})
        memories = [own.get(g, self._predictors[mem_target]) for g in self._gpus]
        for gpu, predictor in own.items():  # a card's own fit predicts its column
            column = self._gpus.index(gpu)
            mem[:, column] = self._predict(mem_target, features, predictor, [column])[:, 0]
        seen = [m.seen(g) for m, g in zip(memories, self._gpus, strict=True)]
        out = []
        for j, job in enumerate(features):
            families = [m.family_seen(job.family, self.table) for m in memories]
            workspace = float(workspace_range(job.sim_workspace_mb, job.sim_workspace_max_mb))
            pads = [_pad(memories[i], self._predictors[mem_target], float(mem[j, i]),
                         workspace, seen[i], families[i]) for i in range(len(self._gpus))]
            out.append({name: Figures(float(mem[j, i]), pads[i], float(unit_s[j, i]),
                                      seen[i], families[i])
                        for i, name in enumerate(self._gpus)})
        return out

    def _from_hardware(self, target: str, features: list[JobFeatures],
                       gpus: list[int]) -> np.ndarray:
        """(jobs, `gpus`) times from the roofline artefact, in the target's unit; NaN rows
        for jobs without traced operations."""
        train = target == TIME_TARGETS["train"]
        per_gpu = [roofline.gpu_columns(self._gpus[i]) for i in gpus]
        rows = []
        for job in features:
            job_columns = {c: float(getattr(job, c)) for c in roofline.COLUMNS
                           if c.startswith("op_")}
            job_columns |= {k: float(v) for k, v in roofline.step_columns(job.batch, train).items()}
            job_columns |= {"input_pipeline": 0.0, "unit_s": SECONDS_PER_UNIT[target]}
            rows += [[{**job_columns, **gpu}[c] for c in roofline.COLUMNS] for gpu in per_gpu]
        X = np.array(rows, dtype=float)
        out = np.full(len(X), np.nan)
        known = ~np.isnan(X).any(axis=1)
        if known.any():
            out[known] = self._hardware[target].regressor.predict(X[known])
        return out.reshape(len(features), len(gpus))

    def _predict(self, target: str, features: list[JobFeatures],
                 predictor: _Predictor | None = None, gpus: list[int] | None = None
                 ) -> np.ndarray:
        """(jobs, GPU types) predictions: one row per job and catalogue type (`gpus`: those
        indices only), in one call (by `predictor`: None, the target's shared artefact)."""
        predictor = predictor or self._predictors[target]
        jobs = [asdict(f) for f in features]
        index = np.arange(len(self._gpus)) if gpus is None else np.asarray(gpus)
        n = len(index)
        X = np.column_stack([
            np.tile(self._gpu_rows[c][index], len(jobs)) if c in self._gpu_rows
            else np.repeat([float(job[c]) for job in jobs], n)
            for c in predictor.columns
        ])  # fmt: skip
        return np.asarray(predictor.regressor.predict(X), dtype=float).reshape(len(jobs), n)
