"""How a placement fragments the GPUs for the pods likely to come next (FGD's measure). Pure.

After Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent" (USENIX ATC '23), on a request's `GpuTable`, in shares of a
GPU (percent of its memory), so that GPUs of different sizes compare:

* **The mix** (`request_mix`): the kinds of jobs on the table's GPUs (the requests the
  cluster has been taking): a kind is a number of GPUs of one node and the share of each,
  rounded up to a whole percent; the most common kinds first, cut once they cover
  `COVERAGE` of the jobs (FGD's "typical pods" at 95 %), their frequencies renormalised.
  A kind asks the median CPU of its jobs' pods. (FGD keys its kinds by CPU as well; read
  from a cluster's own jobs, that splits the mix thin, and it packed worse on openb:
  docs/2026-12-06-openb-fgd-protocol.md.)
* **A node's fragmentation** against the mix: for each kind (weighted by its frequency),
  the free share that a pod of that kind could not use: when the node has as many GPUs
  that can take the kind's share (that much free, below their collocation limit) as the
  kind asks, and the CPU the kind asks left, the free share of the other GPUs; else all
  its free share. A node's CPU left is its allocatable CPU less what the jobs on its GPUs
  asked (pods that hold no GPU of ours are not seen: the measure is FGD's with a partial
  view of CPU); a node whose CPU is not known never runs short.
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
    cpu: np.ndarray  # millicores a pod of the kind asks of its node


NO_MIX = Mix(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))


class TableJobs(NamedTuple):
    """The jobs on a table's GPUs, one entry per job (a pod on k GPUs is one job)."""

    gpus: np.ndarray  # GPUs it holds
    share: np.ndarray  # the largest share of one of them, percent
    cpu: np.ndarray  # millicores its pod asked
    seg: np.ndarray  # the segment (node with GPU rows) it is on


def share_pct(mib: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """MiB of a GPU as its share in percent, rounded up (a share declared as N% reserves
    N% rounded down to whole MiB: it reads back as N)."""
    return np.ceil(PERCENT * mib / capacity - 1e-6)


def request_mix(table: GpuTable) -> Mix:
    """The mix of the jobs on the table's GPUs (module docstring); no kinds when none."""
    return table.remember("fragmentation-mix", None, lambda: _request_mix(table_jobs(table)), 1)


def table_jobs(table: GpuTable) -> TableJobs:
    """The jobs on the table's GPUs: a job is one pod, its GPUs the rows its uid appears
    on, its share the largest of theirs."""
    return table.remember("fragmentation-jobs", None, lambda: _table_jobs(table), 1)


def _table_jobs(table: GpuTable) -> TableJobs:
    busy = np.flatnonzero(table.gpu_jobs > 0)
    if not len(busy):
        return TableJobs(*(np.zeros(0, dtype=np.int64),) * 4)
    width = int(table.gpu_jobs[busy].max())
    slot = table.job_start[busy][:, None] + np.arange(width)[None, :]
    real = np.arange(width)[None, :] < table.gpu_jobs[busy][:, None]
    slots, rows = slot[real], np.broadcast_to(busy[:, None], slot.shape)[real]
    shares = np.clip(share_pct(table.jobs.mib[slots], table.gpu_capacity[rows]), 1, PERCENT)
    uids = np.asarray(table.jobs.uid, dtype=object)[slots]
    _, first, job, gpus = np.unique(uids, return_index=True, return_inverse=True,
                                    return_counts=True)
    share = np.zeros(len(gpus))
    np.maximum.at(share, job, shares)
    return TableJobs(gpus, share, table.jobs.cpu_milli[slots[first]],
                     table.gpu_seg[rows[first]])


def _request_mix(jobs: TableJobs) -> Mix:
    if not len(jobs.gpus):
        return NO_MIX
    kinds, kind, counts = np.unique(np.stack([jobs.gpus, jobs.share], axis=1), axis=0,
                                    return_inverse=True, return_counts=True)
    kind = kind.ravel()
    order = np.lexsort((-kinds[:, 0] * kinds[:, 1], -counts))  # most common; ties: larger
    kept = np.cumsum(counts[order]) - counts[order] < COVERAGE * counts.sum()
    keep = np.sort(order[kept])
    return Mix(kinds[keep, 1], kinds[keep, 0].astype(np.int64), counts[keep] / counts[keep].sum(),
               _median_per_kind(jobs.cpu, kind, counts)[keep])


def _median_per_kind(values: np.ndarray, kind: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median of `values` over each kind's jobs (`kind`: each job's; `counts`: per kind)."""
    ranked = values[np.lexsort((values, kind))]
    starts = np.cumsum(counts) - counts
    return (ranked[starts + (counts - 1) // 2] + ranked[starts + counts // 2]) / 2


def cpu_left(table: GpuTable) -> np.ndarray:
    """Per segment, the node's allocatable CPU less what the jobs on its GPUs asked,
    millicores; inf where the node's CPU is not known."""
    def compute() -> np.ndarray:
        jobs = table_jobs(table)
        allocatable = table.shape.node_cpu[table.seg_nodes]
        used = np.bincount(jobs.seg, weights=jobs.cpu, minlength=len(table.seg_nodes))
        return np.where(allocatable > 0, allocatable - used, np.inf)
    return table.remember("fragmentation-cpu", None, compute, 1)


def _fragmentation(able: np.ndarray, stranded: np.ndarray, total: np.ndarray,
                   cpu: np.ndarray, mix: Mix) -> np.ndarray:
    """Per node (rows of `able`, `stranded`: per kind; `total`: all its free share; `cpu`:
    its CPU left)."""
    fits = (able >= mix.gpus[None, :]) & (cpu[:, None] >= mix.cpu[None, :])
    return np.where(fits, stranded, total[:, None]) @ mix.freq


def placement_delta(table: GpuTable, rows: np.ndarray, job_mib: np.ndarray,
                    limit: np.ndarray, mix: Mix, owner: np.ndarray | None = None,
                    placements: int | None = None, job_cpu: float = 0.0) -> np.ndarray:
    """Per placement, its node's fragmentation after the job (`job_mib` on each of its
    `rows`, `job_cpu` millicores of its node) minus before, in percent of a GPU. `owner`:
    the placement each row belongs to (None: each row is a placement of its own); a
    placement's rows are on one node. `limit`: jobs each row of the table may hold."""
    owner = np.arange(len(rows)) if owner is None else owner
    count = len(rows) if placements is None else placements
    if not len(mix.levels) or not count:
        return np.zeros(count)
    capacity = table.gpu_capacity
    free, takes, able, stranded, total = _node_terms(table, limit, mix)
    seg = np.zeros(count, dtype=np.int64)
    seg[owner] = table.gpu_seg[rows]
    cpu = cpu_left(table)[seg]
    before = _fragmentation(able[seg], stranded[seg], total[seg], cpu, mix)
    free_after = free[rows] - job_mib / capacity[rows] * PERCENT
    takes_after = (free_after[:, None] >= mix.levels[None, :] - 1e-9) & \
        (table.gpu_jobs[rows] + 1 < limit[rows])[:, None]
    was = takes[rows]
    d_able, d_stranded = np.zeros((count, len(mix.levels))), np.zeros((count, len(mix.levels)))
    np.add.at(d_able, owner, takes_after.astype(float) - was)
    np.add.at(d_stranded, owner, free_after[:, None] * ~takes_after - free[rows][:, None] * ~was)
    d_total = np.bincount(owner, weights=free_after - free[rows], minlength=count)
    after = _fragmentation(able[seg] + d_able, stranded[seg] + d_stranded,
                           total[seg] + d_total, cpu - job_cpu, mix)
    return after - before


def cpu_delta(table: GpuTable, limit: np.ndarray, mix: Mix, job_cpu: float) -> np.ndarray:
    """Per segment, how a pod asking `job_cpu` millicores of the node and no GPU changes
    its fragmentation, in percent of a GPU (0 or more: its CPU can only leave a kind
    short). `limit`: jobs each row of the table may hold."""
    segments = len(table.seg_nodes)
    if not len(mix.levels) or not segments or job_cpu <= 0:
        return np.zeros(segments)
    _, _, able, stranded, total = _node_terms(table, limit, mix)
    cpu = cpu_left(table)
    return (_fragmentation(able, stranded, total, cpu - job_cpu, mix)
            - _fragmentation(able, stranded, total, cpu, mix))


def _node_terms(table: GpuTable, limit: np.ndarray, mix: Mix) -> tuple[np.ndarray, ...]:
    """Per row, its free share (percent) and which kinds it can take; per segment and
    kind, the rows that can take the kind and the free share of the others; per segment,
    all its free share."""
    free = np.maximum(table.gpu_free, 0) / table.gpu_capacity * PERCENT
    takes = (free[:, None] >= mix.levels[None, :] - 1e-9) & (table.gpu_jobs < limit)[:, None]
    segments = len(table.seg_nodes)
    able = np.stack([np.bincount(table.gpu_seg, weights=takes[:, k], minlength=segments)
                     for k in range(len(mix.levels))], axis=1)
    stranded = np.stack([np.bincount(table.gpu_seg, weights=free * ~takes[:, k],
                                     minlength=segments) for k in range(len(mix.levels))], axis=1)
    total = np.bincount(table.gpu_seg, weights=free, minlength=segments)
    return free, takes, able, stranded, total


def score(delta: np.ndarray) -> np.ndarray:
    """FGD's integer score of a fragmentation change in percent of a GPU (module
    docstring): 50 for none, higher for a placement that fills a fragment."""
    return np.floor(PERCENT / (1.0 + np.exp(delta / SCORE_SCALE)))
