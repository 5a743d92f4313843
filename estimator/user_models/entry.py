"""Models users register at run time (`schedtune models add`): the entry kept in Redis
and exported under profiles/registered/, and the feature table that includes them.

No torch here: the extender reads entries on the request path. An entry is
either an architecture's cached features (torchinfo sizes at batch 1 and the
simulated peaks per task and batch, exactly the columns of the built-in
models' tables) or a transformer configuration (estimated analytically,
`estimator.transformer.memory`). Everything read back is checked (`from_json`): a
hand-edited or foreign value in Redis is refused with the reason, never
trusted into an estimate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from estimator.errors import EstimatorError
from estimator.feature_table import MAX_BATCH, SIM_COLUMNS, SUMMARY_COLUMNS, TASKS, FeatureTable
from estimator.transformer.config import TransformerConfig

KINDS = ("torchvision", "entry-point", "transformer")
NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")  # as the annotation's
MAX_ENTRY_BYTES = 256 * 1024
MAX_TEXT = 256  # characters of the name, family, kind and source fields
MAX_VALUE = 1e9  # MiB or GFLOP: anything larger is not a reading of a real model
# Differences of two readings, a little below 0 for real models (resnet50's train
# workspace at batch 128: -1.6 MiB; the built-in table's least: -41.8 MiB).
SIGNED_COLUMNS = frozenset({"sim_workspace_mb"})


class RegistryError(EstimatorError):
    """A registration or a stored entry that cannot be used; the message says why."""


@dataclass(frozen=True)
class RegisteredModel:
    """`sims`: task -> batch -> simulated columns; `config`: a transformer's configuration
    (then `summary` and `sims` are empty)."""

    name: str
    family: str
    kind: str
    source: str
    summary: Mapping[str, float] = field(default_factory=dict)
    sims: Mapping[str, Mapping[int, Mapping[str, float]]] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None

    def to_json(self) -> bytes:
        data = asdict(self)
        data["sims"] = {t: {str(b): row for b, row in rows.items()}
                        for t, rows in self.sims.items()}
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    @classmethod
    def from_json(cls, raw: bytes | str) -> RegisteredModel:
        """The one reader of an entry, whoever wrote it: a model, or `RegistryError` naming
        what is wrong (never another exception, whatever the bytes)."""
        try:
            return cls._read(raw)
        except RegistryError:
            raise
        except Exception as exc:  # a value no check above foresaw
            raise RegistryError(f"entry unreadable: {type(exc).__name__}") from exc

    @classmethod
    def _read(cls, raw: bytes | str) -> RegisteredModel:
        if not isinstance(raw, bytes | str):
            raise RegistryError("entry must be JSON text")
        if len(raw) > MAX_ENTRY_BYTES:
            raise RegistryError(f"entry larger than {MAX_ENTRY_BYTES} bytes")
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RegistryError(f"entry is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise RegistryError("entry must be a JSON object")
        name, family, kind, source = (_text(data, k) for k in ("name", "family", "kind",
                                                                 "source"))
        check_name(name)
        if kind not in KINDS:
            raise RegistryError(f"{name}: kind must be one of {', '.join(KINDS)}")
        if kind == "transformer":
            config = data.get("config")
            if not isinstance(config, dict) or not config:
                raise RegistryError(f"{name}: a transformer entry needs its config")
            try:
                TransformerConfig.from_mapping(config)
            except EstimatorError as exc:
                raise RegistryError(f"{name}: config: {exc}") from exc
            return cls(name, family, kind, source, config=config)
        summary = _numbers(data.get("summary"), SUMMARY_COLUMNS, f"{name} summary")
        sims_raw = data.get("sims")
        if not isinstance(sims_raw, dict) or not sims_raw:
            raise RegistryError(f"{name}: no simulated peaks")
        sims: dict[str, dict[int, dict[str, float]]] = {}
        for task, rows in sims_raw.items():
            if task not in TASKS or not isinstance(rows, dict) or not rows:
                raise RegistryError(f"{name}: sims must map {', '.join(TASKS)} to batches")
            sims[task] = {}
            for batch, row in rows.items():
                if not (isinstance(batch, str) and 0 < len(batch) <= 4 and batch.isascii()
                        and batch.isdigit() and 1 <= int(batch) <= MAX_BATCH):
                    raise RegistryError(f"{name}: batch {batch!r} not in 1..{MAX_BATCH}")
                sims[task][int(batch)] = _numbers(row, SIM_COLUMNS, f"{name} {task} {batch}")
        return cls(name, family, kind, source, summary, sims)


def read_entries(entries: Mapping[str, str | bytes], reserved: Container[str]
                 ) -> tuple[dict[str, RegisteredModel], dict[str, str]]:
    """The registry's entries (key -> stored JSON) as models, and the unusable ones, key ->
    why: unreadable (`RegisteredModel.from_json`), stored under another key than its name,
    or named as a model in `reserved` (built in or shipped). Every path reads entries
    through this: the replicas, `/readyz` and the CLI."""
    models, unusable = {}, {}
    for key, raw in entries.items():
        try:
            model = RegisteredModel.from_json(raw)
        except RegistryError as exc:
            unusable[key] = str(exc)
            continue
        if model.name != key:
            unusable[key] = f"stored under {key!r} but named {model.name!r}"
        elif key in reserved:
            unusable[key] = f"{key!r} is a built-in model's name"
        else:
            models[key] = model
    return models, unusable


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise RegistryError(f"model name {name[:40]!r} is invalid: 1..63 characters of letters, "
                            "digits, '.', '_', '-', first and last a letter or digit (it is "
                            "what pods put in schedtune.io/model)")


def with_registered(table: FeatureTable, models: Iterable[RegisteredModel]) -> FeatureTable:
    """`table` plus the registered architectures' features (transformers have none)."""
    summaries, sims = {}, {}
    for m in models:
        if m.kind == "transformer":
            continue
        summaries[m.name] = {"model": m.name, "family": m.family, **m.summary}
        for task, rows in m.sims.items():
            sims[m.name, task] = rows
    return table.with_models(summaries, sims)


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TEXT:
        raise RegistryError(f"entry field {key!r} must be a non-empty string of at most "
                            f"{MAX_TEXT} characters")
    return value


def _numbers(row: Any, columns: Iterable[str], where: str) -> dict[str, float]:
    if not isinstance(row, dict):
        raise RegistryError(f"{where}: expected an object of numbers")
    out = {}
    for column in columns:
        value = row.get(column)
        least = -MAX_VALUE if column in SIGNED_COLUMNS else 0
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not least <= value <= MAX_VALUE):
            raise RegistryError(f"{where}: {column} missing or not a number in "
                                f"{least:.0e}..{MAX_VALUE:.0e} (register the model again "
                                "with this version: schedtune models add)")
        out[column] = float(value)
    return out
