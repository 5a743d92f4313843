"""How a placement fragments the GPUs for the pods likely to come next (FGD's measure). Pure.

After Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23), on a request's `GpuTable`, in shares of a
GPU (percent of its memory), so that GPUs of different sizes compare:

* **The mix** (`request_mix`): the kinds of jobs on the table's GPUs (the requests the
  cluster has been taking): a kind is a number of GPUs of one node and the share of each,
  rounded up to a whole percent; the most common kinds first, cut once they cover
  `COVERAGE` of the jobs (FGD's "typical pods" at 95 %), their frequencies renormalised.
* **A node's fragmentation** against the mix: for each kind (weighted by its frequency),
  the free share that a pod of that kind could not use: when the node has as many GPUs
  that can take the kind's share (that much free, below their collocation limit) as the
  kind asks, the free share of the other GPUs; else all its free share. FGD also counts a
  node short of CPU for the pod as all fragment; CPU is kube-scheduler's to filter and is
  not seen here.
* `placement_delta`: how placing the job on some GPU rows of one node changes that node's
  fragmentation (negative: the placement fills a fragment), and `score`: FGD's integer
  score of it, int(100 sigmoid(-delta in thousandths of a GPU / 1000)). Prioritize breaks
  ties with the score (`EXTENDER_TIE_BREAK=fragmentation`, the default). The integer matters: placements
  within a few hundredths of a GPU of each other tie and go to the best fit (on openb under
  FGD's protocol the raw delta leaves about twice the GPUs unallocated: docs/).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from extender.core.gpu_table import GpuTable

COVERAGE = 0.95
PERCENT = 100.0
SCORE_SCALE = 100.0  # FGD's sigmoid of the delta in thousandths of a GPU over 1,000: percent / 100


class Mix(NamedTuple):
    levels: np.ndarray  # share of each GPU a pod of the kind takes, percent
    gpus: np.ndarray  # GPUs of one node a pod of the kind takes
    freq: np.ndarray  # their weights, summing to 1


NO_MIX = Mix(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))


def share_pct(mib: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """MiB of a GPU as its share in percent, rounded up (a share declared as N% reserves
    N% rounded down to whole MiB: it reads back as N)."""
    return np.ceil(PERCENT * mib / capacity - 1e-6)


def request_mix(table: GpuTable) -> Mix:
    """The mix of the jobs on the table's GPUs (module docstring); no kinds when none. A
    job is one pod: its GPUs are the rows its uid appears on, its share the largest."""
    return table.remember("fragmentation-mix", None, lambda: _request_mix(table), 1)


def _request_mix(table: GpuTable) -> Mix:
    busy = np.flatnonzero(table.gpu_jobs > 0)
    if not len(busy):
        return NO_MIX
    width = int(table.gpu_jobs[busy].max())
    slot = table.job_start[busy][:, None] + np.arange(width)[None, :]
    real = np.arange(width)[None, :] < table.gpu_jobs[busy][:, None]
    slots, rows = slot[real], np.broadcast_to(busy[:, None], slot.shape)[real]
    shares = np.clip(share_pct(table.jobs.mib[slots], table.gpu_capacity[rows]), 1, PERCENT)
    uids = np.asarray(table.jobs.uid, dtype=object)[slots]
    _, job, gpus = np.unique(uids, return_inverse=True, return_counts=True)
    share = np.zeros(len(gpus))
    np.maximum.at(share, job, shares)
    kinds, counts = np.unique(np.stack([gpus, share], axis=1), axis=0, return_counts=True)
    order = np.lexsort((-kinds[:, 0] * kinds[:, 1], -counts))  # most common; ties: larger
    kept = np.cumsum(counts[order]) - counts[order] < COVERAGE * counts.sum()
    keep = np.sort(order[kept])
    return Mix(kinds[keep, 1], kinds[keep, 0].astype(np.int64), counts[keep] / counts[keep].sum())


def _fragmentation(able: np.ndarray, stranded: np.ndarray, total: np.ndarray,
                   mix: Mix) -> np.ndarray:
    """Per node (rows of `able`, `stranded`: per kind; `total`: all its free share)."""
    return np.where(able >= mix.gpus[None, :], stranded, total[:, None]) @ mix.freq


def placement_delta(table: GpuTable, rows: np.ndarray, job_mib: np.ndarray,
                    limit: np.ndarray, mix: Mix, owner: np.ndarray | None = None,
                    placements: int | None = None) -> np.ndarray:
    """Per placement, its node's fragmentation after the job (`job_mib` on each of its
    `rows`) minus before, in percent of a GPU. `owner`: the placement each row belongs to
    (None: each row is a placement of its own); a placement's rows are on one node.
    `limit`: jobs each row of the table may hold."""
    owner = np.arange(len(rows)) if owner is None else owner
    count = len(rows) if placements is None else placements
    if not len(mix.levels) or not count:
        return np.zeros(count)
    capacity = table.gpu_capacity
    free = np.maximum(table.gpu_free, 0) / capacity * PERCENT
    takes = (free[:, None] >= mix.levels[None, :] - 1e-9) & (table.gpu_jobs < limit)[:, None]
    segments = len(table.seg_nodes)
    able = np.stack([np.bincount(table.gpu_seg, weights=takes[:, k], minlength=segments)
                     for k in range(len(mix.levels))], axis=1)
    stranded = np.stack([np.bincount(table.gpu_seg, weights=free * ~takes[:, k],
                                     minlength=segments) for k in range(len(mix.levels))], axis=1)
    total = np.bincount(table.gpu_seg, weights=free, minlength=segments)
    seg = np.zeros(count, dtype=np.int64)
    seg[owner] = table.gpu_seg[rows]
    before = _fragmentation(able[seg], stranded[seg], total[seg], mix)
    free_after = free[rows] - job_mib / capacity[rows] * PERCENT
    takes_after = (free_after[:, None] >= mix.levels[None, :] - 1e-9) & \
        (table.gpu_jobs[rows] + 1 < limit[rows])[:, None]
    was = takes[rows]
    d_able, d_stranded = np.zeros((count, len(mix.levels))), np.zeros((count, len(mix.levels)))
    np.add.at(d_able, owner, takes_after.astype(float) - was)
    np.add.at(d_stranded, owner, free_after[:, None] * ~takes_after - free[rows][:, None] * ~was)
    d_total = np.bincount(owner, weights=free_after - free[rows], minlength=count)
    after = _fragmentation(able[seg] + d_able, stranded[seg] + d_stranded,
                           total[seg] + d_total, mix)
    return after - before


def score(delta: np.ndarray) -> np.ndarray:
    """FGD's integer score of a fragmentation change in percent of a GPU (module
    docstring): 50 for none, higher for a placement that fills a fragment."""
    return np.floor(PERCENT / (1.0 + np.exp(delta / SCORE_SCALE)))
