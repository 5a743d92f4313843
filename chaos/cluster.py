"""The cluster every chaos scenario uses: its nodes and GPUs (layouts as GPU Feature
Discovery labels them), the collocation limit, and the pods sent. No I/O."""

from __future__ import annotations

import random
import uuid

from extender.wire.builders import gfd_node, pod_object

GPUS_PER_NODE, NODES, LIMIT, MEMORY, SLOTS = 2, 4, 3, 24576, 4
PRODUCT = "NVIDIA-GeForce-RTX-3090"
NODE_NAMES = tuple(f"gpu-{i}" for i in range(NODES))
MODELS = ["resnet50", "vgg16", "densenet121", "mobilenet_v2", "bert_base", "resnet18"]


def node_objects(memory_mib: int = MEMORY, count: int = GPUS_PER_NODE) -> list[dict]:
    return [gfd_node(name, PRODUCT, count, memory_mib, SLOTS) for name in NODE_NAMES]


def pod(annotated: bool = True, rng: random.Random | None = None, model: str | None = None,
        batch: int | None = None) -> dict:
    """A pod whose spec carries a secret (env) that must never reach a log line."""
    rng = rng or random.Random()
    if annotated:
        model, batch = model or rng.choice(MODELS), batch or rng.choice([8, 16, 32, 64])
    return pod_object(f"p-{uuid.uuid4().hex[:10]}", "chaos", str(uuid.uuid4()), model=model,
                      batch=batch, image="x", gpus=None, env={"TOKEN": "chaos-secret"})
