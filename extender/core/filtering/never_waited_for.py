"""The GPUs the patience stage never waits for, and what a wait costs on top. Pure.

When a GPU frees is unknown once a job there ran past its predicted end; a GPU of a
make the catalogue does not know has the worst known type's seconds, not a prediction.
"""

from __future__ import annotations

import numpy as np

from extender.core.gpu_table import GpuTable
from extender.model import UNKNOWN_TYPE, type_of

#: Seconds a refused pod may take to come back once the GPU frees: kube-scheduler's
#: podMaxBackoffSeconds (default 10). Short jobs are never worth the round trip.
RETRY_S = 10.0


def of_unknown_make(table: GpuTable) -> np.ndarray:
    """Per row of `table`: a GPU of a make the catalogue does not know (its seconds there
    are the worst known type's, not a prediction)."""
    return np.array([g is not None and type_of(g) == UNKNOWN_TYPE for g in table.layouts],
                    dtype=bool)[table.gpu_layout]


def overran(table: GpuTable, rows: np.ndarray, remaining: np.ndarray) -> np.ndarray:
    """Per row of `rows` (`remaining`: their jobs, `room.jobs_ahead`): a job there ran past
    its predicted end, so when the GPU frees is unknown."""
    jobs = np.arange(remaining.shape[1])[None, :] < table.gpu_jobs[rows][:, None]
    return (jobs & (remaining <= 0)).any(axis=1)
