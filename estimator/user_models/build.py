"""Build a user's model and compute its entry for the registry (offline: imports torch).

Three sources, none downloading anything (random or no weights):

* a torchvision architecture name (``convnext_small``),
* a factory in the user's own code, ``package.module:factory`` (imported from
  `path` when given), returning an ``nn.Module``, with its input: ``image:CxHxW``
  or ``tokens:SEQ_LEN:VOCAB``,
* a transformer configuration (a Hugging Face ``config.json`` or ours): no torch
  at all, it is estimated analytically per job (`estimator.transformer.memory`).

Architectures get the built-in models' features for `DEFAULT_BATCHES` (torchinfo
at batch 1, the simulated peak per task and batch); other batches are then
interpolated linearly between the two nearest computed ones, or extrapolated from
the two nearest outside their range (`estimator.feature_table`: the simulated
peak is affine in the batch).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from estimator import zoo
from estimator.feature_table import SIM_COLUMNS, SUMMARY_COLUMNS
from estimator.user_models.entry import RegisteredModel, RegistryError, check_name

DEFAULT_BATCHES = {"train": (1, 8, 16, 32, 64), "inference": (1, 8, 32, 128)}
MAX_INPUT_DIM = 8192


def parse_input(text: str) -> dict[str, Any]:
    """``image:3x224x224`` or ``tokens:512:32000`` -> ModelSpec keyword arguments."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "image":
            shape = tuple(int(d) for d in rest.split("x"))
            if not shape or not all(1 <= d <= MAX_INPUT_DIM for d in shape):
                raise ValueError
            return {"input_kind": "image", "input_shape": shape}
        if kind == "tokens":
            seq_len, vocab = (int(v) for v in rest.split(":"))
            if not (1 <= seq_len <= MAX_INPUT_DIM and 2 <= vocab <= 10**7):
                raise ValueError
            return {"input_kind": "text", "seq_len": seq_len, "vocab": vocab}
    except ValueError:
        pass
    raise RegistryError(f"input {text!r}: expected image:CxHxW (e.g. image:3x224x224) or "
                        f"tokens:SEQ_LEN:VOCAB (e.g. tokens:512:32000), dimensions "
                        f"1..{MAX_INPUT_DIM}")


def torchvision_spec(name: str, arch: str, family: str | None = None) -> zoo.ModelSpec:
    check_name(name)
    models = zoo._torchvision_models()
    if arch not in models.list_models():
        raise RegistryError(f"{arch!r} is not a torchvision architecture; see "
                            "torchvision.models.list_models()")
    return zoo.ModelSpec(name, family or f"torchvision:{arch.rstrip('0123456789_')}", "image",
                         1000, lambda: models.get_model(arch, weights=None))


def entry_point_spec(name: str, target: str, input_text: str, family: str | None = None,
                     num_classes: int = 1000, path: Path | None = None) -> zoo.ModelSpec:
    """A factory from the user's code; it is imported (and called) here, offline."""
    check_name(name)
    module_name, _, attr = target.partition(":")
    if not module_name or not attr or module_name.startswith("."):
        raise RegistryError(f"entry point {target!r}: expected package.module:factory "
                            "(an absolute module name)")
    with _importable(path):
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise RegistryError(f"entry point {target!r}: {exc}") from exc
        except (Exception, SystemExit) as exc:  # noqa: BLE001  (the user's module failed)
            raise RegistryError(f"entry point {target!r}: importing {module_name} failed: "
                                f"{type(exc).__name__}: {exc}") from exc
    if not callable(factory):
        raise RegistryError(f"entry point {target!r} is not callable")

    def build() -> Any:
        from torch import nn  # noqa: PLC0415

        model = factory()
        if not isinstance(model, nn.Module):
            raise RegistryError(f"{target}() returned {type(model).__name__}, not an nn.Module")
        return model

    return zoo.ModelSpec(name, family or f"user:{name}", **parse_input(input_text),
                         num_classes=num_classes, build=build)


def compute(spec: zoo.ModelSpec, kind: str, source: str,
            batches: Mapping[str, Iterable[int]] = DEFAULT_BATCHES) -> RegisteredModel:
    """The entry of an architecture: its features, as `schedtune features` computes them
    for the built-in models. Raises `RegistryError` when the model does not run."""
    from estimator.simulation import features  # noqa: PLC0415  (torch)

    zoo.register(spec)
    try:
        summary = asdict(features.summarize(spec.name))
        sims = {task: {p.batch: {c: getattr(p, c) for c in SIM_COLUMNS}
                       for p in features.simulate_peaks(spec.name, task, list(sizes))}
                for task, sizes in batches.items()}
    except RegistryError:
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001  (the user's model failed)
        raise RegistryError(f"{spec.name}: the model failed to build or run on a "
                            f"{spec.input_kind} input: {type(exc).__name__}: {exc}") from exc
    return RegisteredModel(spec.name, spec.family, kind, source,
                           {c: float(summary[c]) for c in SUMMARY_COLUMNS}, sims)


def transformer_entry(name: str, config: Mapping[str, Any], source: str,
                      family: str | None = None) -> RegisteredModel:
    """A transformer configuration, validated (`TransformerConfig.from_mapping`)."""
    from estimator.transformer.config import TransformerConfig  # noqa: PLC0415

    check_name(name)
    parsed = TransformerConfig.from_mapping(config)
    return RegisteredModel(name, family or f"transformer:{name}", "transformer", source,
                           config=asdict(parsed))


@contextmanager
def _importable(path: Path | None):
    if path is None:
        yield
        return
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))
