"""Stored values read back into domain types: what `RedisStore` returns. Pure.

Nothing here ever raises on what Redis holds, so one broken record (a bad value
written by hand, a forged annotation before it was refused, an older format)
never fails a request or blocks a reconcile: each reader says how it reads an
unreadable value, and decisions count such a job as filling its GPU.
"""

from __future__ import annotations

import math
from dataclasses import fields as dataclass_fields
from collections.abc import Mapping
from typing import Any

import orjson

from extender.core.time_bias import BIAS_PREFIX, MAX_BIAS
from extender.core.annotations import MAX_GPUS
from extender.wire.gangs import MAX_GANG
from extender.model import JobRecord, NodeGpus, QueuedJob, Waiter
from extender.wire.cpu import MAX_MILLI as MAX_CPU_MILLI
from extender.wire.node_labels import MAX_GPU_MEMORY_MIB, MAX_GPUS_PER_NODE, MAX_REPLICAS

MAX_FLOOR_MIB = 2**20  # 1 TiB: a larger OOM floor is not a reading of any GPU
_LAYOUT_FIELDS = [field.name for field in dataclass_fields(NodeGpus)]
# A stored alpha above this is no reading (EXTENDER_INTERFERENCE_ALPHA's own bound; the
# monitor publishes at most `extender.core.interference.MAX_ALPHA`).
MAX_STORED_ALPHA = 10.0


def live_waiters(raw: list[str], now: float) -> tuple[Waiter, ...]:
    """Decoded waiters not yet expired, oldest first, each once (a bad entry is skipped,
    not fatal)."""
    waiters: dict[str, Waiter] = {}
    for item in raw:
        try:
            entry = orjson.loads(item)
            if float(entry["expires_at"]) <= now:
                continue
            needs = {str(t): (float(m), float(s)) for t, (m, s) in entry["needs"].items()}
            gpus, since = int(entry.get("gpus", 1)), float(entry["since"])
            members = int(entry.get("members", 1))
            if not 1 <= gpus <= MAX_GPUS or not 1 <= members <= MAX_GANG \
                    or not math.isfinite(since) or not all(
                    0 < m <= MAX_GPU_MEMORY_MIB and 0 <= s < math.inf for m, s in needs.values()):
                continue  # not what filter writes: no hold for it, no line in a report
            waiter = Waiter(str(entry["uid"]), since, needs, str(entry.get("pod", "")), gpus,
                            members)
            waiters[waiter.uid] = waiter
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            continue
    return tuple(sorted(waiters.values(), key=lambda w: (w.since, w.uid)))


def layout_from_json(raw: str) -> NodeGpus | None:
    """A stored node layout; None when it is not one the node watcher could have written
    (a wrong type, a count or memory out of bounds): the node then has no known layout."""
    try:
        stored = orjson.loads(raw)
    except ValueError:
        return None
    return layout_from_fields(stored) if isinstance(stored, dict) else None


def layout_from_row(row: Any) -> NodeGpus:
    """A layout stored as its `NodeGpus.as_row` (a filter record's; one written before
    `cpu_milli` was a field lacks it); ValueError when it is not one."""
    layout = layout_from_fields(dict(zip(_LAYOUT_FIELDS, row, strict=False))) \
        if isinstance(row, list) and len(row) in (len(_LAYOUT_FIELDS) - 1, len(_LAYOUT_FIELDS)) \
        else None
    if layout is None:
        raise ValueError(f"not a stored node layout: {str(row)[:80]}")
    return layout


def layout_from_fields(fields: Mapping[str, Any]) -> NodeGpus | None:
    uuids, memories = fields.get("uuids", ()), fields.get("memories", ())
    if not isinstance(uuids, (list, tuple)) or not all(isinstance(u, str) for u in uuids) \
            or not isinstance(memories, (list, tuple)) or not all(
                type(m) is int and 0 < m <= MAX_GPU_MEMORY_MIB for m in memories):
        return None
    try:
        layout = NodeGpus(**{**fields, "uuids": tuple(uuids), "memories": tuple(memories)})
    except TypeError:
        return None
    if (layout.uuids and len(layout.uuids) != layout.count) or (layout.memories and (
            len(layout.memories) != layout.count or max(layout.memories) != layout.memory_mib)):
        return None
    counts = (layout.count, layout.memory_mib, layout.share_slots, layout.cpu_milli)
    if (not isinstance(layout.product, str) or not isinstance(layout.problem, str)
            or not (layout.gpu_type is None or isinstance(layout.gpu_type, str))
            or any(isinstance(n, bool) or not isinstance(n, int) for n in counts)
            or not (0 <= layout.count <= MAX_GPUS_PER_NODE
                    and 0 <= layout.memory_mib <= MAX_GPU_MEMORY_MIB
                    and 0 <= layout.share_slots <= MAX_REPLICAS
                    and 0 <= layout.cpu_milli <= MAX_CPU_MILLI)):
        return None
    return layout


def as_mapping(pairs: list[str] | dict[str, str]) -> dict[str, str]:
    if isinstance(pairs, dict):
        return pairs
    return dict(zip(pairs[::2], pairs[1::2], strict=False))  # a stray odd field is dropped


MAX_CORRECTION_CHARS = 512  # a bias key: GPU type, task, model, batch, owner


def job_from_pairs(pairs: list[str]) -> JobRecord:
    return job_from_mapping(as_mapping(pairs))


def job_from_mapping(data: Mapping[str, str]) -> JobRecord:
    """A job hash as a record (bookkeeping: release, reconcile, observations, the CLI).

    Never raises, whatever the hash holds, so a broken record can still be listed and
    released: a number that is unreadable or not finite reads as 0 (a GPU index that is
    not a small non-negative integer as -1: no GPU). Decisions never read these records
    (they read the queue rows, `queued_jobs`)."""
    def number(key: str) -> float:
        return reading(data.get(key), 0.0)

    def whole(key: str, default: int) -> int:
        text = str(data.get(key, ""))
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else default

    return JobRecord(
        uid=data.get("uid", ""), pod=data.get("pod", ""), namespace=data.get("namespace", ""),
        model=data.get("model", ""), task=data.get("task", ""), node=data.get("node", ""),
        gpu_index=whole("gpu_index", -1), reserved_mib=number("reserved_mib"),
        predicted_s=number("predicted_s"), state=data.get("state", "reserved"),
        reserved_at=number("reserved_at"), started_at=number("started_at"),
        expires_at=number("expires_at"), gpu_type=data.get("gpu_type", ""),
        batch=whole("batch", 0), units=whole("units", 0),
        gpu_indices=gpu_list(data.get("gpus", "")), grown_mib=number("grown_mib"),
        device_uuids=tuple(u for u in str(data.get("device_uuids", "")).split(",") if u),
        handed_over_at=number("handed_over_at"),
        time_factor=number("time_factor") or 1.0,
        time_correction=str(data.get("time_correction", ""))[:MAX_CORRECTION_CHARS],
        cpu_milli=whole("cpu_milli", 0),
    )  # fmt: skip


MAX_LISTED_GPUS = 64


def gpu_list(text: Any) -> tuple[int, ...]:
    """A stored comma-separated list of GPU indices; () when absent or unreadable."""
    parts = str(text or "").split(",")
    if not text or len(parts) > MAX_LISTED_GPUS or not all(
            p.isascii() and p.isdigit() and len(p) <= 4 for p in parts):
        return ()
    return tuple(int(p) for p in parts)


UNREADABLE_PREDICTED_S = 86_400.0  # a queued job whose predicted time cannot be read


def alphas_from_pairs(pairs: list[str]) -> dict[str, float]:
    """Learned collocation slowdowns as stored (GPU type -> alpha; `GPU type|runs` fields
    are for operators); unreadable or out-of-range values are left out (the configured
    alpha then applies)."""
    alphas = {}
    for key, raw in as_mapping(pairs).items():
        alpha = reading(raw, math.nan)
        if "|" not in key and alpha <= MAX_STORED_ALPHA:
            alphas[key] = alpha
    return alphas


def time_biases_from_pairs(pairs: list[str]) -> dict[str, float]:
    """The learned time biases stored beside the alphas (``bias|<key>`` fields); unreadable
    or out-of-range values are left out (the estimate then stands)."""
    biases = {}
    for key, raw in as_mapping(pairs).items():
        if key.startswith(BIAS_PREFIX) and not key.endswith("|runs"):
            bias = reading(raw, math.nan)
            if abs(bias) <= MAX_BIAS:
                biases[key.removeprefix(BIAS_PREFIX)] = bias
    return biases


def queued_jobs(rows: list[str]) -> tuple[QueuedJob, ...]:
    """A queue's rows as `CHANGES` returns them (uid, reserved MiB, predicted s, started at,
    expires at, CPU millicores, ...) for decisions. Never raises on what a job hash holds: MiB that are
    unreadable or not finite read as NaN, which the mirror counts as the whole GPU (a
    broken record never makes room); predicted seconds as `UNREADABLE_PREDICTED_S` (busy
    for long, so holds look elsewhere); instants as 0 (not started; no expiry, so the
    job keeps counting until the monitor releases it); CPU as 0 (not known: it strands
    nothing)."""
    return tuple(QueuedJob(rows[i], reading(rows[i + 1], math.nan),
                           reading(rows[i + 2], UNREADABLE_PREDICTED_S),
                           reading(rows[i + 3], 0.0), reading(rows[i + 4], 0.0),
                           min(reading(rows[i + 5], 0.0), MAX_CPU_MILLI))
                 for i in range(0, len(rows) - 5, 6))  # fmt: skip


def reading(text: Any, default: float) -> float:
    """`text` as a finite, non-negative float, else `default`."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) and value >= 0 else default


def floors_from_pairs(pairs: list[str]) -> dict[str, float]:
    """OOM floors as stored (job type -> MiB); unreadable, non-finite or non-positive
    values are left out (a floor only ever adds room)."""
    floors = {}
    for key, raw in as_mapping(pairs).items():
        mib = reading(raw, 0.0)
        if 0 < mib <= MAX_FLOOR_MIB:
            floors[key] = mib
    return floors
