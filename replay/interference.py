"""How jobs sharing one GPU slow each other down in a replay world: the law, not a guess
of it.

* `Uniform(alpha)`: every one of k jobs runs at 1 / (1 + alpha (k - 1)), the law ours'
  scoring plays forward (alpha fitted on Gavel's V100 pairs, profiles/interference.json).
* `Pairwise`: job i beside the set J runs at 1 / (1 + sum over j in J of a(i, j)), where
  a(i, j) = 1/r - 1 for r the throughput ratio Gavel measured for i beside j when both
  map onto Gavel's job types (ResNet-18/50 training), else the GPU type's own alpha. With
  every a equal to alpha it is `Uniform(alpha)`; it differs from it in two ways ours does
  not know: pairs are asymmetric, and each GPU type has its own alpha.

`gavel_pairwise(seed, data_dir)` draws the per-type law of a perturbed world: each GPU
type takes one Gavel GPU's pair table and median alpha (K80 0.87, P100 0.70, V100 0.47,
committed in profiles/interference.json) times U(0.75, 1.33), fixed by the seed. The pair
table is read from ``DATA/gavel-osdi20/simulation_throughputs.json`` when present.
Imports nothing of the service.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parent.parent
INTERFERENCE = ROOT / "profiles" / "interference.json"
GAVEL_FILE = Path("gavel-osdi20") / "simulation_throughputs.json"
#: Our models that are Gavel job types, and the batch sizes Gavel measured them at.
GAVEL_MODELS = {"resnet18": ("ResNet-18", (16, 32, 64, 128, 256)),
                "resnet50": ("ResNet-50", (16, 32, 64, 128))}
ALPHA_SPREAD = (0.75, 1.33)


class JobLike(Protocol):
    model: str
    task: str
    batch: int


class Interference(Protocol):
    def speeds(self, gpu_type: str, jobs: Sequence[JobLike]) -> list[float]:
        """Each job's speed (work seconds per second, 1 alone) while `jobs` share a GPU."""
        ...

    def describe(self) -> str: ...


def committed_alpha() -> float:
    return float(json.loads(INTERFERENCE.read_text())["alpha"])


@dataclass(frozen=True)
class Uniform:
    alpha: float

    def speeds(self, gpu_type: str, jobs: Sequence[JobLike]) -> list[float]:
        speed = 1.0 / (1.0 + self.alpha * max(0, len(jobs) - 1))
        return [speed] * len(jobs)

    def describe(self) -> str:
        return f"uniform: 1/(1 + {self.alpha:g} (k-1)) on every GPU type"


@dataclass(frozen=True)
class Pairwise:
    alpha_by_type: Mapping[str, float]
    gavel_gpu_by_type: Mapping[str, str] = field(default_factory=dict)
    # (gavel gpu, this job's Gavel key, other's Gavel key) -> a = alone/shared - 1
    pairs: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    default_alpha: float = 0.47

    def speeds(self, gpu_type: str, jobs: Sequence[JobLike]) -> list[float]:
        alpha = self.alpha_by_type.get(gpu_type, self.default_alpha)
        gavel = self.gavel_gpu_by_type.get(gpu_type, "")
        keys = [gavel_key(j) for j in jobs]
        out = []
        for i, mine in enumerate(keys):
            slowdown = 0.0
            for j, theirs in enumerate(keys):
                if i != j:
                    slowdown += self.pairs.get((gavel, mine, theirs), alpha) \
                        if mine and theirs else alpha
            out.append(1.0 / (1.0 + slowdown))
        return out

    def describe(self) -> str:
        per_type = ", ".join(f"{t} {a:.2f} ({self.gavel_gpu_by_type.get(t, '?')})"
                             for t, a in sorted(self.alpha_by_type.items()))
        return (f"pairwise: 1/(1 + sum of a(i, j)); a from Gavel's measured pairs where both "
                f"jobs map ({len(self.pairs)} pairs), else per GPU type: {per_type}")


def gavel_key(job: JobLike) -> str:
    """The Gavel job type a training job maps onto ("" when none): same network, the
    nearest batch size Gavel measured."""
    if job.task != "train" or job.model not in GAVEL_MODELS:
        return ""
    name, batches = GAVEL_MODELS[job.model]
    batch = min(batches, key=lambda b: (abs(b - job.batch), b))
    return f"{name} (batch size {batch})"


def load_pairs(data_dir: Path | None) -> dict[tuple[str, str, str], float]:
    """a(i, j) per Gavel GPU for the job types `GAVEL_MODELS` covers; {} without the data."""
    path = Path(data_dir) / GAVEL_FILE if data_dir else None
    if path is None or not path.is_file():
        return {}
    table = json.loads(path.read_text())
    wanted = {f"{n} (batch size {b})" for n, bs in GAVEL_MODELS.values() for b in bs}
    pairs = {}
    for gpu in ("k80", "p100", "v100"):
        for raw, runs in table.get(gpu, {}).items():
            mine = _name(raw)
            alone = runs.get("null")
            if mine not in wanted or not alone:
                continue
            for other_raw, pair in runs.items():
                other = _name(other_raw)
                if other in wanted and pair[0] > 0:
                    pairs[gpu, mine, other] = max(0.0, alone / pair[0] - 1.0)
    return pairs


def _name(raw: str) -> str:
    """"('ResNet-18 (batch size 16)', 1)" -> "ResNet-18 (batch size 16)" (scale factor 1
    only: one GPU per job)."""
    match = re.fullmatch(r"\('(.+)', 1\)", raw)
    return match[1] if match else ""


def gavel_pairwise(seed: int, gpu_types: Sequence[str], data_dir: Path | None) -> Pairwise:
    """A perturbed world's law: per GPU type a Gavel GPU (its pairs and median alpha times
    U(0.75, 1.33)), drawn from `seed`."""
    per_gpu = json.loads(INTERFERENCE.read_text())["per_gpu"]
    rng = random.Random(f"interference:{seed}")
    gavel_by_type, alpha_by_type = {}, {}
    for gpu_type in sorted(gpu_types):
        gavel = rng.choice(sorted(per_gpu))
        gavel_by_type[gpu_type] = gavel
        alpha_by_type[gpu_type] = round(per_gpu[gavel]["alpha"] * rng.uniform(*ALPHA_SPREAD), 3)
    return Pairwise(alpha_by_type, gavel_by_type, load_pairs(data_dir),
                    default_alpha=max(alpha_by_type.values(), default=committed_alpha()))
