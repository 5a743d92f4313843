"""How a placement fragments the GPUs for the pods likely to come next (FGD's measure). Pure.

After Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23), on a request's `GpuTable`, in shares of a
GPU (percent of its memory), so that GPUs of different sizes compare:

* **The mix** (`request_mix`): the shares the jobs on the table's GPUs hold (the requests
  the cluster has been taking), each rounded up to a whole percent; the most common levels
  first, cut once they cover `COVERAGE` of the jobs (FGD's "typical pods" at 95 %), their
  frequencies renormalised. A job on k GPUs counts once on each.
* **A node's fragmentation** against the mix: for each level L (weighted by its
  frequency), the free share that a pod of L could not use: the free share of the GPUs
  that cannot take L (less than L free, or at their collocation limit) when some GPU of the
  node can, else all its free share. FGD also counts a node short of CPU for the pod as
  all fragment; CPU is kube-scheduler's to filter and is not seen here.
* `placement_delta`: how placing the job on one GPU row changes its node's fragmentation
  (negative: the placement fills a fragment). Prioritize breaks ties with it
  (`EXTENDER_TIE_BREAK=fragmentation`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from extender.core.gpu_table import GpuTable

COVERAGE = 0.95
PERCENT = 100.0


class Mix(NamedTuple):
    levels: np.ndarray  # shares of a GPU, percent, ascending
    freq: np.ndarray  # their weights, summing to 1


def share_pct(mib: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """MiB of a GPU as its share in percent, rounded up (a share declared as N% reserves
    N% rounded down to whole MiB: it reads back as N)."""
    return np.ceil(PERCENT * mib / capacity - 1e-6)


def request_mix(table: GpuTable) -> Mix:
    """The mix of the jobs on the table's GPUs (module docstring); no levels when none."""
    busy = np.flatnonzero(table.gpu_jobs > 0)
    if not len(busy):
        return Mix(np.zeros(0), np.zeros(0))
    width = int(table.gpu_jobs[busy].max())
    mib = table.jobs_matrix(busy, width, table.jobs.mib)
    shares = share_pct(mib, table.gpu_capacity[busy][:, None])[mib > 0]
    levels, counts = np.unique(np.clip(shares, 1, PERCENT), return_counts=True)
    order = np.lexsort((-levels, -counts))  # most common first; ties: larger first
    kept = np.cumsum(counts[order]) - counts[order] < COVERAGE * counts.sum()
    chosen = order[kept]
    keep = np.sort(chosen)
    return Mix(levels[keep], counts[keep] / counts[keep].sum())


def _node_terms(free: np.ndarray, takes: np.ndarray, seg: np.ndarray, segments: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment and level: GPUs that can take the level, free share on those that
    cannot; per segment: all free share."""
    able = np.empty((segments, takes.shape[1]))
    stranded = np.empty((segments, takes.shape[1]))
    for level in range(takes.shape[1]):
        able[:, level] = np.bincount(seg, weights=takes[:, level], minlength=segments)
        stranded[:, level] = np.bincount(seg, weights=free * ~takes[:, level],
                                         minlength=segments)
    return able, stranded, np.bincount(seg, weights=free, minlength=segments)


def placement_delta(table: GpuTable, rows: np.ndarray, job_mib: np.ndarray,
                    limit: np.ndarray, mix: Mix) -> np.ndarray:
    """For each GPU row of `rows` (one per node), its node's fragmentation after the job
    (`job_mib` on that row) minus before, in percent of a GPU. `limit`: jobs each row of
    the table may hold."""
    if not len(mix.levels) or not len(rows):
        return np.zeros(len(rows))
    capacity = table.gpu_capacity
    free = np.maximum(table.gpu_free, 0) / capacity * PERCENT
    takes = (free[:, None] >= mix.levels[None, :] - 1e-9) & \
        (table.gpu_jobs < limit)[:, None]
    able, stranded, total = _node_terms(free, takes, table.gpu_seg, len(table.seg_nodes))
    seg = table.gpu_seg[rows]
    before = np.where(able[seg] > 0, stranded[seg], total[seg][:, None]) @ mix.freq
    free_after = free[rows] - job_mib / capacity[rows] * PERCENT
    takes_after = (free_after[:, None] >= mix.levels[None, :] - 1e-9) & \
        (table.gpu_jobs[rows] + 1 < limit[rows])[:, None]
    was = takes[rows]
    able_after = able[seg] - was + takes_after
    stranded_after = (stranded[seg] - free[rows][:, None] * ~was
                      + free_after[:, None] * ~takes_after)
    total_after = total[seg] - (free[rows] - free_after)
    after = np.where(able_after > 0, stranded_after, total_after[:, None]) @ mix.freq
    return after - before
