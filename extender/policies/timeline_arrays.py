"""`extender.policies.timeline` over many GPUs at once: the same arithmetic, in numpy. Pure.

Each function takes one row per GPU and one column per job on it (the jobs in
queue order; a row with fewer jobs pads with 0, which every function ignores as
the scalar ones ignore jobs with no work left) and gives, per row, exactly what
its scalar counterpart gives for that GPU: the same IEEE operations in the same
order (sequential sums, the same divisions by `speed`), so decisions made on
arrays equal those made GPU by GPU, bit for bit. Loops run over job columns
(a handful: the collocation limit), never over GPUs.
"""

from __future__ import annotations

import numpy as np

FloatArray = np.ndarray


def remaining_s(predicted_s: FloatArray, started_at: FloatArray, now: float) -> FloatArray:
    """`timeline.remaining_s` elementwise: work left in seconds alone on the GPU."""
    elapsed = now - started_at
    elapsed = np.where(elapsed > 0.0, elapsed, 0.0)  # max(0.0, x), NaN included
    left = predicted_s - elapsed
    left = np.where(left > 0.0, left, 0.0)
    return np.where(started_at > 0, left, predicted_s)


def _speed(jobs_on_gpu: np.ndarray, alpha: float) -> FloatArray:
    return 1.0 / (1.0 + alpha * np.maximum(0, jobs_on_gpu - 1))


def _sorted_positive(works: FloatArray) -> tuple[FloatArray, np.ndarray]:
    """Each row's positive works in ascending order, +inf after them, and how many."""
    positive = works > 0
    return np.sort(np.where(positive, works, np.inf), axis=1), positive.sum(axis=1)


def completion_times_s(works_s: FloatArray, alpha: float) -> tuple[FloatArray, np.ndarray]:
    """Per row, `timeline.completion_times_s`: column i is when the (i+1)-th shortest job
    finishes; (times, how many jobs each row has). Columns past a row's count are 0."""
    pending, count = _sorted_positive(works_s)
    rows, width = pending.shape
    done = np.zeros((rows, width))
    elapsed = np.zeros(rows)
    progressed = np.zeros(rows)
    with np.errstate(invalid="ignore"):
        for i in range(width):
            active = count > i
            if not active.any():
                break
            step = pending[:, i] - progressed
            elapsed = np.where(active, elapsed + step / _speed(count - i, alpha), elapsed)
            progressed = np.where(active, pending[:, i], progressed)
            done[:, i] = np.where(active, elapsed, 0.0)
    return done, count


def left_after_s(works_s: FloatArray, at_s: FloatArray, alpha: float) -> FloatArray:
    """Per row, each job's work left (seconds alone) `at_s[row]` seconds from now, the row's
    jobs sharing the GPU from now on as `completion_times_s` plays them (0 once ended);
    columns as in `works_s`."""
    pending, count = _sorted_positive(works_s)
    done, _ = completion_times_s(works_s, alpha)
    progressed = np.zeros(len(pending))
    for i in range(pending.shape[1]):
        start_s = done[:, i - 1] if i else 0.0
        start = pending[:, i - 1] if i else 0.0
        running = (count > i) & (at_s > start_s)
        with np.errstate(invalid="ignore"):
            reached = np.minimum(start + (at_s - start_s) * _speed(count - i, alpha),
                                 pending[:, i])
        progressed = np.where(running, reached, progressed)
    with np.errstate(invalid="ignore"):  # an endless job (inf) that has progressed inf
        return np.where(works_s > 0, np.maximum(works_s - progressed[:, None], 0.0), 0.0)


def completion_sums_s(works_s: FloatArray, alpha: float) -> FloatArray:
    """Per row, ``sum(timeline.completion_times_s(row))``, summed in the same order."""
    done, count = completion_times_s(works_s, alpha)
    total = np.zeros(len(done))
    for i in range(done.shape[1]):
        total = np.where(count > i, total + done[:, i], total)
    return total


def marginal_costs_s(remaining: FloatArray, work_s: FloatArray, alpha: float) -> FloatArray:
    """Per row, `timeline.marginal_cost_s(work_s, remaining row, alpha)`."""
    with_job = np.concatenate([remaining, work_s[:, None]], axis=1)
    return completion_sums_s(with_job, alpha) - completion_sums_s(remaining, alpha)


def drain_times_s(remaining: FloatArray, work_s: FloatArray, alpha: float) -> FloatArray:
    """Per row, when the last job finishes once the job of `work_s` joins (`Drain.cost_s`:
    the last of `timeline.completion_times_s`; 0 for a row with no work at all)."""
    with_job = np.concatenate([remaining, work_s[:, None]], axis=1)
    done, count = completion_times_s(with_job, alpha)
    return np.where(count > 0, done[np.arange(len(done)), np.maximum(count - 1, 0)], 0.0)


def shared_completions_s(remaining: FloatArray, work_s: FloatArray, alpha: float) -> FloatArray:
    """Per row, `timeline.shared_completion_s(work_s, remaining row, alpha)`."""
    pending, count = _sorted_positive(remaining)
    rows, width = pending.shape
    left = np.array(work_s, dtype=float)
    elapsed = np.zeros(rows)
    popped = np.zeros(rows, dtype=np.int64)
    running = np.ones(rows, dtype=bool)
    with np.errstate(invalid="ignore"):
        for i in range(width):
            running = running & (count > i) & (pending[:, i] < left)
            if not running.any():
                break
            first = pending[:, i].copy()
            # speed(2 + len(pending)) once the shortest is popped: count - i - 1 left.
            elapsed = np.where(running, elapsed + first / _speed(count - i + 1, alpha), elapsed)
            left = np.where(running, left - first, left)
            pending[:, i + 1:] = np.where(running[:, None], pending[:, i + 1:] - first[:, None],
                                          pending[:, i + 1:])
            popped += running
    return elapsed + left / _speed(1 + count - popped, alpha)


def paper_costs_s(remaining: FloatArray, work_s: FloatArray) -> FloatArray:
    """Per row, the remaining times summed in queue order, plus the job's own work."""
    total = np.zeros(len(remaining))
    for i in range(remaining.shape[1]):
        total = total + remaining[:, i]
    return total + work_s


def waits_until_fit_s(remaining: FloatArray, reserved_mib: FloatArray, jobs: np.ndarray,
                      free_mib: FloatArray, capacity_mib: FloatArray, need_mib: FloatArray,
                      limit: np.ndarray, alpha: float) -> FloatArray:
    """Per row, `timeline.wait_until_fits_s`: seconds until the GPU's jobs, ending in
    completion order, leave `need_mib` free below `limit` jobs (0 now, inf never).

    `remaining` and `reserved_mib` are the row's jobs (first `jobs` columns)."""
    rows, width = remaining.shape
    wait = np.full(rows, np.inf)
    fits_now = (free_mib >= need_mib) & (jobs < limit)
    wait[fits_now] = 0.0
    played = ~(need_mib > capacity_mib) & ~fits_now & (jobs > 0)
    wait[need_mib > capacity_mib] = np.inf
    if not played.any() or width == 0:
        return wait
    real = np.arange(width)[None, :] < jobs[:, None]
    works = np.where(real, np.where(1e-6 > remaining, 1e-6, remaining), np.inf)
    mib = np.where(real, reserved_mib, np.inf)
    order = np.lexsort((mib, works), axis=1)
    works = np.take_along_axis(works, order, axis=1)
    mib = np.take_along_axis(mib, order, axis=1)
    ends, _ = completion_times_s(np.where(real, works, 0.0), alpha)
    free, count = free_mib.copy(), jobs.copy()
    found = ~played
    for i in range(width):
        step = played & (jobs > i) & ~found
        if not step.any():
            break
        free = np.where(step, free + mib[:, i], free)
        count = np.where(step, count - 1, count)
        hit = step & (free >= need_mib) & (count < limit)
        wait[hit] = ends[hit, i]
        found |= hit
    return wait
