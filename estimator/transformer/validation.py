"""The LLM memory model against published measurements: errors, the pad, and its held-out test.

Reads ``tests/data/llm/measured.json`` (published measured peaks, each with its source and
what it includes), estimates each with `estimate_memory` on the same scope (``allocated``
and ``reserved`` compare PyTorch's tensors, ``device`` everything, ``device-minus-kv``
everything but the KV cache), and derives the pad the way `estimator.padding` does for the
CNN estimators: the largest relative under-estimate, (measured - estimate) / estimate, with
a floor (`MIN_PAD`). That pad is in-sample; the honest figure is leave-one-source-out: each
source group's rows are padded with the pad derived from the other groups only, and the
report says how many of them would still have been under-allocated.

Offline tooling (the CLI ``schedtune llm-memory``); the service reads only the pad it
writes to ``profiles/llm/pad.json``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from estimator.catalogue import CATALOGUE, get_gpu
from estimator.errors import DataMissing, EstimatorError, InvalidJob
from estimator.transformer.config import LLM_PROFILES_DIR, LlmWorkload, TransformerConfig
from estimator.transformer.memory import (MIB, MemoryBreakdown, estimate_memory, kv_cache_bytes,
                                  lower_bound_mib, padded_mib)
from estimator.transformer.step_time import estimate_time

MEASURED_FILE = Path(__file__).resolve().parents[2] / "tests" / "data" / "llm" / "measured.json"
PAD_FILE = LLM_PROFILES_DIR / "pad.json"
#: Floor on the pad: the caching allocator rounds blocks (2 MiB segments, 512-byte rounding)
#: and fragments; an analytic estimate that happens to match a few figures still needs room.
MIN_PAD = 0.05
SCOPES = ("allocated", "reserved", "device", "device-minus-kv")
UNIT_BYTES = {"GiB": 2.0**30, "GB": 1e9, "B": 1.0}
GIB_PER_MIB = 1 / 1024


@dataclass(frozen=True)
class Measurement:
    """One published measured peak; ``measured_mib`` in MiB whatever the source's unit."""

    id: str
    source_group: str
    model: str
    gpu: str
    measured_mib: float
    scope: str
    workload: LlmWorkload
    source: str
    notes: str
    not_modelled: tuple[str, ...]


def _measurement(entry: Mapping[str, Any], models: Iterable[str]) -> Measurement:
    ident = entry.get("id", "?")
    try:
        unit, scope, value = entry["unit"], entry["scope"], entry["measured"]
        if unit not in UNIT_BYTES:
            raise InvalidJob(f"unit must be one of {sorted(UNIT_BYTES)}, got {unit!r}")
        if scope not in SCOPES:
            raise InvalidJob(f"scope must be one of {SCOPES}, got {scope!r}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidJob(f"measured must be a positive number, got {value!r}")
        if entry["model"] not in models:
            raise InvalidJob(f"model {entry['model']!r} is not a shipped configuration")
        if not str(entry.get("source", "")).startswith("https://"):
            raise InvalidJob("source must cite a https:// URL")
        return Measurement(
            id=str(ident), source_group=str(entry["source_group"]), model=entry["model"],
            gpu=get_gpu(entry["gpu"]).name, measured_mib=value * UNIT_BYTES[unit] / MIB,
            scope=scope, workload=LlmWorkload.from_mapping(entry["workload"]),
            source=entry["source"], notes=str(entry.get("notes", "")),
            not_modelled=tuple(entry.get("not_modelled", ())))
    except KeyError as exc:
        raise InvalidJob(f"measurement {ident}: missing field {exc}") from exc
    except EstimatorError as exc:
        raise InvalidJob(f"measurement {ident}: {exc}") from exc


def load_measurements(models: Iterable[str], path: Path = MEASURED_FILE) -> list[Measurement]:
    """The published measurements, validated; ids are unique. Raises `DataMissing`,
    `InvalidJob`."""
    try:
        entries = json.loads(path.read_text())["measurements"]
    except FileNotFoundError as exc:
        raise DataMissing(f"no measurements file at {path}") from exc
    names = set(models)
    out = [_measurement(e, names) for e in entries]
    ids = [m.id for m in out]
    if len(set(ids)) != len(ids):
        raise InvalidJob(f"duplicate measurement ids in {path}")
    return out


def scoped_mib(breakdown: MemoryBreakdown, scope: str) -> float:
    """The part of an estimate a measurement of ``scope`` includes."""
    if scope in ("allocated", "reserved"):
        return breakdown.tensors_mib
    if scope == "device-minus-kv":
        return breakdown.total_mib - breakdown.kv_cache
    return breakdown.total_mib


@dataclass(frozen=True)
class Comparison:
    measurement: Measurement
    breakdown: MemoryBreakdown
    estimate_mib: float  # on the measurement's scope
    lower_bound_mib: float  # on the measurement's scope (no context: it is a floor)

    @property
    def error(self) -> float:
        """(estimate - measured) / measured: negative is an under-estimate."""
        return self.estimate_mib / self.measurement.measured_mib - 1.0

    @property
    def under(self) -> float:
        """(measured - estimate) / estimate: the pad this row alone would need."""
        return self.measurement.measured_mib / self.estimate_mib - 1.0


def compare(measurement: Measurement, configs: Mapping[str, TransformerConfig]) -> Comparison:
    config, wl = configs[measurement.model], measurement.workload
    breakdown = estimate_memory(config, wl, measurement.gpu)
    floor = lower_bound_mib(config, wl)
    if measurement.scope == "device-minus-kv":
        floor -= kv_cache_bytes(config, wl) / MIB
    return Comparison(measurement, breakdown, scoped_mib(breakdown, measurement.scope), floor)


def compare_all(measurements: Sequence[Measurement],
                configs: Mapping[str, TransformerConfig]) -> list[Comparison]:
    return [compare(m, configs) for m in measurements]


def derive_pad(comparisons: Iterable[Comparison], floor: float = MIN_PAD) -> float:
    """Smallest pad with estimate x (1 + pad) >= measured on every row, at least ``floor``."""
    return max([floor, *(c.under for c in comparisons)])


def held_out_pads(comparisons: Sequence[Comparison], floor: float = MIN_PAD) -> dict[str, float]:
    """For each source group, the pad derived from the other groups only."""
    groups = sorted({c.measurement.source_group for c in comparisons})
    if len(groups) < 2:
        raise InvalidJob("a held-out pad needs measurements from at least two sources")
    return {g: derive_pad((c for c in comparisons if c.measurement.source_group != g), floor)
            for g in groups}


def report(comparisons: Sequence[Comparison], floor: float = MIN_PAD) -> dict[str, Any]:
    """Every row (estimate, error, floor, padded in-sample and held out) and a summary."""
    pad = derive_pad(comparisons, floor)
    held = held_out_pads(comparisons, floor)
    rows = []
    for c in comparisons:
        m = c.measurement
        held_pad = held[m.source_group]
        held_padded = c.estimate_mib * (1 + held_pad)
        rows.append({
            "id": m.id, "source_group": m.source_group, "model": m.model, "gpu": m.gpu,
            "task": m.workload.task, "mode": m.workload.mode, "dtype": m.workload.dtype,
            "scope": m.scope, "measured_gib": m.measured_mib * GIB_PER_MIB,
            "estimate_gib": c.estimate_mib * GIB_PER_MIB, "error_pct": 100 * c.error,
            "lower_bound_gib": c.lower_bound_mib * GIB_PER_MIB,
            "lower_bound_gap_pct": 100 * (m.measured_mib / c.lower_bound_mib - 1),
            "padded_gib": c.estimate_mib * (1 + pad) * GIB_PER_MIB,
            "held_out_pad_pct": 100 * held_pad, "held_out_padded_gib": held_padded * GIB_PER_MIB,
            "held_out_padded_error_pct": 100 * (held_padded / m.measured_mib - 1),
            "under_allocated_held_out": held_padded < m.measured_mib,
            "phase": c.breakdown.phase, "breakdown_mib": c.breakdown.as_dict(),
            "not_modelled": list(m.not_modelled), "source": m.source,
        })
    errors = [r["error_pct"] for r in rows]
    clean = [r["error_pct"] for r in rows if not r["not_modelled"]]
    summary = {
        "rows": len(rows), "pad_floor_pct": 100 * floor, "pad_in_sample_pct": 100 * pad,
        "held_out_pad_pct": {g: 100 * p for g, p in held.items()},
        "mean_abs_error_pct": sum(map(abs, errors)) / len(errors),
        "mean_abs_error_pct_fully_modelled": sum(map(abs, clean)) / len(clean) if clean else None,
        "worst_under_estimate_pct": min(errors), "worst_over_estimate_pct": max(errors),
        "under_allocated_held_out": sum(r["under_allocated_held_out"] for r in rows),
        "below_lower_bound": [r["id"] for r in rows if r["lower_bound_gap_pct"] < 0],
    }
    return {"rows": rows, "summary": summary}


def pad_document(comparisons: Sequence[Comparison], data: bytes,
                 floor: float = MIN_PAD) -> dict[str, Any]:
    """What ``profiles/llm/pad.json`` holds: the pad, how it was derived, from what data."""
    return {
        "pad": round(derive_pad(comparisons, floor), 6),
        "floor": floor,
        "held_out": {g: round(p, 6) for g, p in held_out_pads(comparisons, floor).items()},
        "rows": len(comparisons),
        "measurements_sha256": hashlib.sha256(data).hexdigest(),
        "derivation": "largest (measured - estimate) / estimate over tests/data/llm/measured.json"
                      " (in-sample), at least the floor; held_out: the same without each source",
    }


def gpu_table(config: TransformerConfig, workload: LlmWorkload,
              pad: float) -> list[dict[str, Any]]:
    """One model and workload on every catalogue GPU: breakdown, padded MiB, fit, time."""
    rows = []
    for name, gpu in CATALOGUE.items():
        b = estimate_memory(config, workload, name)
        need = padded_mib(b, pad)
        rows.append({"gpu": name, "memory_mib": gpu.memory_mib, "total_mib": b.total_mib,
                     "padded_mib": need, "fits": need <= gpu.memory_mib, "phase": b.phase,
                     "breakdown_mib": b.as_dict(),
                     "time": estimate_time(config, workload, name).as_dict()})
    return rows
