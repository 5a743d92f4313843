"""Model registry: model name -> architecture, built with random weights.

Offline only (feature computation, profiling). Importing this module is cheap;
torch and torchvision are imported inside the builders, never at import time,
so the request path can read `MODEL_NAMES` without paying for torch.

torchvision 0.28.0's compiled extension is a CUDA build that fails to register
its operators on the CPU build of torch, which makes a plain
``import torchvision`` raise. Its model classes are pure Python, so
`_torchvision_models` loads ``torchvision.models`` under a stand-in parent
package that skips ``torchvision/__init__.py`` (the only place that workaround
lives). Nothing is ever downloaded: ``weights=None`` everywhere.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

IMAGE_SHAPE = (3, 224, 224)
TEXT_SEQ_LEN = 128
TEXT_VOCAB = 30522


@dataclass(frozen=True)
class ModelSpec:
    """One registered architecture.

    `input_kind` is ``image`` (float `input_shape` per sample, 3x224x224 unless
    told) or ``text`` (int64 token ids below `vocab`, `seq_len` per sample);
    `num_classes` sizes the loss used for the simulated training step.
    """

    name: str
    family: str
    input_kind: str
    num_classes: int
    build: Callable[[], Any]
    input_shape: tuple[int, ...] = IMAGE_SHAPE
    seq_len: int = TEXT_SEQ_LEN
    vocab: int = TEXT_VOCAB


def _torchvision_models() -> types.ModuleType:
    """Return ``torchvision.models`` without running ``torchvision/__init__``."""
    loaded = sys.modules.get("torchvision.models")
    if loaded is not None:
        return loaded
    if "torchvision" not in sys.modules:
        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError("torchvision is not installed (see requirements.txt)")
        parent = types.ModuleType("torchvision")
        parent.__path__ = list(spec.submodule_search_locations)
        parent.__file__ = spec.origin
        sys.modules["torchvision"] = parent
    import torchvision.models  # noqa: PLC0415  (resolved under the stand-in parent)

    return torchvision.models


def _torchvision(name: str) -> Callable[[], Any]:
    def build() -> Any:
        return _torchvision_models().get_model(name, weights=None)

    return build


def _bert_encoder(layers: int, width: int, heads: int) -> Callable[[], Any]:
    """A BERT-style encoder classifier (post-norm, GELU, learned positions)."""

    def build() -> Any:
        import torch  # noqa: PLC0415
        from torch import nn  # noqa: PLC0415

        class BertClassifier(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.tokens = nn.Embedding(TEXT_VOCAB, width)
                self.positions = nn.Embedding(TEXT_SEQ_LEN, width)
                self.norm = nn.LayerNorm(width)
                layer = nn.TransformerEncoderLayer(
                    width, heads, 4 * width, activation="gelu", batch_first=True
                )
                self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                self.head = nn.Linear(width, 2)

            def forward(self, ids: torch.Tensor) -> torch.Tensor:
                pos = torch.arange(ids.shape[1], device=ids.device)
                hidden = self.norm(self.tokens(ids) + self.positions(pos))
                return self.head(self.encoder(hidden)[:, 0])

        return BertClassifier()

    return build


def _spec(name: str, family: str) -> ModelSpec:
    return ModelSpec(name, family, "image", 1000, _torchvision(name))


#: The paper's 12 CNNs (the ones in the authors' measured data) come first.
PAPER_MODELS: tuple[str, ...] = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "densenet121", "densenet169", "densenet201",
    "vgg11", "vgg13", "vgg16", "vgg19",
)  # fmt: skip

_EXTRA: tuple[tuple[str, str], ...] = (
    ("resnext50_32x4d", "resnext"),
    ("resnext101_32x8d", "resnext"),
    ("wide_resnet50_2", "wide_resnet"),
    ("mobilenet_v2", "mobilenet"),
    ("mobilenet_v3_large", "mobilenet"),
    ("efficientnet_b0", "efficientnet"),
    ("efficientnet_b3", "efficientnet"),
    ("convnext_tiny", "convnext"),
    ("regnet_y_1_6gf", "regnet"),
    ("squeezenet1_1", "squeezenet"),
    ("alexnet", "alexnet"),
    ("vit_b_16", "vit"),
    ("swin_t", "swin"),
)

REGISTRY: dict[str, ModelSpec] = {
    **{n: _spec(n, n.rstrip("0123456789")) for n in PAPER_MODELS},
    **{n: _spec(n, family) for n, family in _EXTRA},
    "bert_base": ModelSpec("bert_base", "bert", "text", 2, _bert_encoder(12, 768, 12)),
    "bert_small": ModelSpec("bert_small", "bert", "text", 2, _bert_encoder(4, 512, 8)),
}

MODEL_NAMES: tuple[str, ...] = tuple(REGISTRY)


def register(spec: ModelSpec) -> None:
    """Add a model for this process (`schedtune models add`: a user's architecture)."""
    REGISTRY[spec.name] = spec


def get_spec(name: str) -> ModelSpec:
    """Look a model up by name; `KeyError` names the accepted values."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}") from None
