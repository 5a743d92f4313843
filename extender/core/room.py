"""Which GPUs have room for a job: memory, collocation slots, and the room a hold keeps
for a waiting pod (`Hold`; which GPUs are held is the filter's holds stage,
`extender.core.filtering.holds`). Pure.

A held GPU takes another job only if both fit, or if the job is gone before the waiter
would fit anyway (within `BACKFILL_SLACK`): EASY backfilling's rule, with GPU memory
as the resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from extender.core.gpu_table import GpuTable
from extender.model import GpuState, Limits, Need, NodeState, QueuedJob
from extender.policies.timeline import wait_until_fits_s
from extender.policies.timeline_arrays import remaining_s

BACKFILL_SLACK = 1.1  # a backfilled job may push the waiter's expected fit back 10 %


@dataclass(frozen=True)
class Hold:
    """A GPU kept for a waiting pod: `padded_mib` of it stays free for that pod, unless a
    job would be gone before the pod fits anyway (`fits_in_s`, played forward at `now`)."""

    uid: str
    padded_mib: float
    fits_in_s: float = 0.0
    now: float = 0.0
    alpha: float = 0.0
    limit: int = 0
    shorter: bool = False  # held because the waiter is much shorter, not because it is old


Holds = Mapping[tuple[str, int], Hold]  # (node, gpu index) -> the hold on it
NO_HOLDS: Holds = {}


def has_room(gpu: GpuState, need: Need, limit: int, hold: Hold | None) -> bool:
    """The job fits on `gpu` now: memory and a slot, beside the room a hold keeps, or as a
    backfill that leaves before the waiter would fit anyway."""
    if not (len(gpu.jobs) < limit and need.padded_mib <= gpu.free_mib):
        return False
    if hold is None:
        return True
    if len(gpu.jobs) + 1 < limit and need.padded_mib + hold.padded_mib <= gpu.free_mib:
        return True  # fits beside the waiter
    # Backfill: the job may borrow the held room if the waiter would not fit sooner without it.
    job = QueuedJob("backfill", need.padded_mib, need.predicted_s)
    later = GpuState(gpu.node, gpu.index, gpu.capacity_mib, (*gpu.jobs, job))
    return wait_until_fits_s(later, hold.padded_mib, hold.limit, hold.now,
                             hold.alpha) <= hold.fits_in_s * BACKFILL_SLACK


def usable_gpus(node: NodeState, need: Need, limit: int,
                holds: Holds = NO_HOLDS) -> list[GpuState]:
    """GPUs that can take the job now, best fit (least free memory left) first."""
    if holds:
        fitting = [g for g in node.gpu_states
                   if has_room(g, need, limit, holds.get((g.node, g.index)))]  # fmt: skip
    else:  # the common case, spelled out: this runs for every GPU of every request
        fitting = [g for g in node.gpu_states
                   if len(g.jobs) < limit and need.padded_mib <= g.free_mib]  # fmt: skip
    if len(fitting) > 1:
        fitting.sort(key=lambda g: (g.free_mib, g.index))
    return fitting


def held_rows(table: GpuTable, holds: Holds) -> list[int]:
    """The rows of `table` that `holds` keeps for waiting pods."""
    return [row for node, index in holds if (row := table.row_of(node, index)) is not None]


def jobs_ahead(table: GpuTable, rows: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
    """The jobs on `rows` of `table`, a row each: seconds of work left alone on the GPU and
    MiB reserved (columns past a row's jobs are padding), as `waits_until_fit_s` reads them."""
    width = int(table.gpu_jobs[rows].max()) if len(rows) else 0
    remaining = remaining_s(table.jobs_matrix(rows, width, table.jobs.predicted_s),
                            table.jobs_matrix(rows, width, table.jobs.started_at), now)
    return remaining, table.jobs_matrix(rows, width, table.jobs.mib)


def held_from(node: NodeState, need: Need, limits: Limits, holds: Holds) -> list[int]:
    """The node's GPUs that a hold keeps from this job (bind must not pick them)."""
    if not holds or node.gpus is None:
        return []
    limit = limits.for_node(node.gpus)
    return [g.index for g in node.gpu_states
            if (hold := holds.get((node.name, g.index))) and not has_room(g, need, limit, hold)]
