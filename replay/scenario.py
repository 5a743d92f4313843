"""What a replay assumes, as one picklable value (`Scenario`), and the world it builds.

Worlds (``--world``):

* ``reference``: the reference data as the truth (measured training memory,
  reconstructed times and inference memory); every estimator that decides was fitted
  on these very rows, so it flatters them (kept for comparison with earlier results);
* ``predicted``: no reference data: the committed predictors' output plus noise is the
  truth (circular: ours decides with the same predictors);
* ``lomo`` / ``lofo``: the reference truth, every deciding estimator (ours, the paper's
  RFR) trained without the job's model / family (`replay.folds`);
* ``perturbed``: the reference truth (else the predicted one) times a fixed unknown error
  per (model, task, batch, GPU type), under a collocation law ours does not play
  forward (Gavel's pairs, an alpha per GPU type), both drawn from ``--world-seed``.

Assumptions default to the stricter choice: a starting job shares its GPU and is slowed
by it; the cluster's collocation limit is per GPU type (`replay.workloads.default_slots`);
an OOM-killed pod is created again by its Job up to `retry_limit` times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from replay.interference import Uniform, committed_alpha, gavel_pairwise
from replay.world import Perturbation, World

WORLDS = ("reference", "predicted", "lomo", "lofo", "perturbed")
INTERFERENCE = ("auto", "uniform", "gavel")
#: EXTENDER_* variables that say how the service runs, not how it decides: the replay
#: sets these itself.
NOT_DECIDING = {"EXTENDER_" + k for k in (
    "BIND", "BIND_ADDRESS", "NODE_WATCH", "LOG_LEVEL", "STATE_DIR", "TLS_CERT_FILE",
    "TLS_KEY_FILE", "TLS_CLIENT_CA_FILE", "AUTH_TOKEN_FILE", "WORKERS", "WORKER_CONNECTIONS",
    "MONITOR_PORT", "RECONCILE_S", "SCHEDULER_NAME", "EVENT_RATE", "EVENT_BURST")}


def extender_env(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The ``EXTENDER_*`` variables of `env` that change decisions: ours in a replay is the
    extender as these configure it (``EXTENDER_SCORING=shared schedtune replay``)."""
    return tuple(sorted((k, v) for k, v in env.items()
                        if k.startswith("EXTENDER_") and k not in NOT_DECIDING))


@dataclass(frozen=True)
class Scenario:
    world: str = "reference"
    data_dir: Path | None = None
    world_seed: int = 1
    startup_s: float = 10.0
    startup_shares: bool = True
    interference: str = "auto"  # auto: gavel in perturbed worlds, uniform elsewhere
    retry_limit: int = 3
    folds: tuple[tuple[str, str], ...] = ()  # held-out worlds: (fold, artefact directory)
    extender_env: tuple[tuple[str, str], ...] = ()  # EXTENDER_* deciding how ours decides

    @property
    def held_out(self) -> str:
        """"lomo" or "lofo" for a held-out world, else ""."""
        return self.world if self.world in ("lomo", "lofo") else ""

    def build_world(self, gpu_types: Iterable[str]) -> World:
        gavel = self.interference == "gavel" or (self.interference == "auto"
                                                 and self.world == "perturbed")
        law = gavel_pairwise(self.world_seed, sorted(set(gpu_types)), self.data_dir) if gavel \
            else Uniform(committed_alpha())
        world = World.load(None if self.world == "predicted" else self.data_dir,
                           startup_s=self.startup_s, interference=law,
                           startup_shares=self.startup_shares,
                           perturbation=Perturbation(self.world_seed)
                           if self.world == "perturbed" else None)
        if self.held_out:
            kind = "model" if self.held_out == "lomo" else "architecture family"
            world.name = (f"held out ({self.held_out}): every deciding estimator trained "
                          f"without the job's {kind}; truth: {world.name}")
        elif self.world == "perturbed":
            world.name = f"perturbed ({self.world_seed}): {world.name}"
        return world

    def describe(self) -> dict:
        return {"world_option": self.world, "world_seed": self.world_seed,
                "ours_configured_by": dict(self.extender_env),
                "retry_limit": self.retry_limit,
                "assumptions": [
                    "start-up " + ("shares the GPU and is slowed by it" if self.startup_shares
                                   else "takes wall-clock time and slows nobody"),
                    f"an OOM-killed pod is created again after 10 s x 2^n, at most "
                    f"{self.retry_limit} times; JCT counts from the first arrival",
                    "collocation limit per GPU type: the nodes' time-slicing replicas"]}
